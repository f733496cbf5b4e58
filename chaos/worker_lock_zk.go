package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkService locks with the lock recipe of github.com/go-zookeeper/zk:
// an ephemeral sequential znode under zkLockPath, held while it has the
// lowest sequence number, on a session whose timeout is the lease. The
// session lives across attempts, as an application's would; a session
// that expired (its holder was frozen past it) is replaced by the client
// itself, and an attempt given up closes it (zkLock), so the next one
// opens another.
type zkService struct {
	servers []string
	ttl     time.Duration
	conn    *zk.Conn
	n       int // attempts so far, to tell this worker's znodes apart
}

func newZKService(cfg workerConfig) (*zkService, error) {
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("chaos worker: no ZooKeeper servers")
	}
	if time.Duration(cfg.TTLms)*time.Millisecond != zkTTL {
		// The servers allow sessions of exactly zkTTL: another one would
		// be negotiated silently, and the history checked against a lease
		// the holder does not have.
		return nil, fmt.Errorf("chaos worker: ZooKeeper sessions are %v here, not %d ms", zkTTL, cfg.TTLms)
	}
	if cfg.PollMs > 0 {
		return nil, errors.New("chaos worker: the ZooKeeper lock recipe has no try-lock to poll with")
	}
	return &zkService{servers: cfg.Nodes, ttl: zkTTL}, nil
}

func (z *zkService) recordsItself() bool { return false }

func (z *zkService) close() {
	if z.conn != nil {
		z.conn.Close() // the session ends, and any znode of it
	}
}

func (z *zkService) attempt(ctx context.Context, w *worker, s *section) (attemptOutcome, error) {
	if z.conn == nil {
		conn, err := newZKConn(z.servers, z.ttl)
		if err != nil {
			return outcomeNotLocked, err
		}
		z.conn = conn
	}
	lctx, cancel := context.WithTimeout(ctx, time.Duration(w.cfg.LockMs)*time.Millisecond)
	defer cancel()
	z.n++
	me := []byte(fmt.Sprintf("worker %d attempt %d", w.cfg.ID, z.n))
	l := zk.NewLock(z.conn, zkLockPath, zk.WorldACL(zk.PermAll))
	if err := zkLock(lctx, z.conn, l, me); err != nil {
		if lctx.Err() != nil {
			z.conn = nil // zkLock closed it
		}
		return outcomeNotLocked, explainZK(z.servers, err)
	}
	// The recipe does not say which znode is ours or until when the
	// session lasts. One read now tells both: the lowest znode must carry
	// our data, and the session lasts at least its timeout from the
	// moment the read was sent (the server heard from us after that).
	sent := time.Now()
	token, err := z.holding(me)
	if err != nil {
		_ = l.Unlock()
		return outcomeNotLocked, explainZK(z.servers, fmt.Errorf("zk: the lock could not be confirmed: %w", err))
	}
	// The token is the lock znode's czxid, the transaction that created
	// it. Holders hold in the order of their znodes' sequence numbers,
	// which is the order the ensemble created them in, so a later
	// holder's czxid always exceeds an earlier one's.
	h := &tokenHold{token: token, deadline: sent.Add(z.ttl)}
	outcome, err := w.section(ctx, h, s)
	_ = l.Unlock() // fails with zk.ErrNoNode where the session expired meanwhile
	s.releaseNs = stampNs()
	return outcome, err
}

// holding returns the czxid of the lowest znode under zkLockPath, if it
// carries data me.
func (z *zkService) holding(me []byte) (uint64, error) {
	children, _, err := z.conn.Children(zkLockPath)
	if err != nil {
		return 0, err
	}
	lowest, low := "", -1
	for _, c := range children {
		_, num, ok := strings.Cut(c, "lock-")
		seq, err := strconv.Atoi(num)
		if !ok || err != nil {
			return 0, fmt.Errorf("zk: unexpected znode %q under %s", c, zkLockPath)
		}
		if low < 0 || seq < low {
			lowest, low = c, seq
		}
	}
	if lowest == "" {
		return 0, fmt.Errorf("zk: no znode under %s", zkLockPath)
	}
	data, st, err := z.conn.Get(zkLockPath + "/" + lowest)
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(data, me) {
		return 0, fmt.Errorf("zk: the lowest znode %s is not ours", lowest)
	}
	return uint64(st.Czxid), nil
}
