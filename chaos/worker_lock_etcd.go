package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// etcdService locks with the etcd client's concurrency.Mutex on a session
// lease, as etcd's own documentation shows. The session keeps its lease
// alive in the background; a session whose lease ended (its holder was
// frozen past the TTL) is replaced by a new one at the next attempt.
type etcdService struct {
	cli  *clientv3.Client
	ttl  int64 // seconds
	sess *concurrency.Session
}

func newEtcdService(cfg workerConfig) (*etcdService, error) {
	if len(cfg.Nodes) == 0 {
		return nil, errors.New("chaos worker: no etcd endpoints")
	}
	if cfg.TTLms <= 0 || cfg.TTLms%1000 != 0 {
		return nil, fmt.Errorf("chaos worker: etcd leases are whole seconds, not %d ms", cfg.TTLms)
	}
	cli, err := newEtcdClient(cfg.Nodes)
	if err != nil {
		return nil, fmt.Errorf("chaos worker: %w", err)
	}
	return &etcdService{cli: cli, ttl: int64(cfg.TTLms / 1000)}, nil
}

func (e *etcdService) recordsItself() bool { return false }

func (e *etcdService) close() {
	if e.sess != nil {
		e.sess.Orphan() // its lease expires on its own; a dead cluster cannot revoke it
	}
	_ = e.cli.Close()
}

// session returns a live session, granting a new lease when the last one
// ended. The grant is bounded by ctx; the session's keep-alive is not.
func (e *etcdService) session(ctx context.Context) (*concurrency.Session, error) {
	if e.sess != nil {
		select {
		case <-e.sess.Done():
			e.sess.Orphan()
			e.sess = nil
		default:
			return e.sess, nil
		}
	}
	lease, err := e.cli.Grant(ctx, e.ttl)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(e.cli, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(e.ttl)))
	if err != nil {
		return nil, err
	}
	e.sess = s
	return s, nil
}

func (e *etcdService) attempt(ctx context.Context, w *worker, s *section) (attemptOutcome, error) {
	// Ask for a leader: a member cut off from the majority then refuses
	// at once instead of waiting out the lock's deadline.
	lctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), time.Duration(w.cfg.LockMs)*time.Millisecond)
	defer cancel()
	sess, err := e.session(lctx)
	if err != nil {
		return outcomeNotLocked, explainEtcd(e.cli, err)
	}
	m := concurrency.NewMutex(sess, etcdPrefix)
	if err := e.lock(lctx, w, m); err != nil {
		e.dropIfExpired(sess)
		return outcomeNotLocked, explainEtcd(e.cli, err)
	}
	unlock := func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = m.Unlock(uctx)
	}
	// The session renews its lease in the background but does not say
	// until when it is valid. One keep-alive sent now tells: the lease
	// lasts at least its TTL from the moment it was sent.
	sent := time.Now()
	ka, err := e.cli.KeepAliveOnce(lctx, sess.Lease())
	if err != nil {
		unlock()
		e.dropIfExpired(sess)
		return outcomeNotLocked, fmt.Errorf("etcd: the lock's lease could not be confirmed: %w", explainEtcd(e.cli, err))
	}
	// The token is the revision of the response that granted the Mutex,
	// which a later holder's grant always exceeds (its key can only be
	// first once the earlier holder's key was deleted, a later revision).
	h := &tokenHold{token: uint64(m.Header().Revision), deadline: sent.Add(time.Duration(ka.TTL) * time.Second)}
	outcome, err := w.section(ctx, h, s)
	unlock()
	s.releaseNs = stampNs()
	return outcome, err
}

// lock waits in Mutex.Lock, or, for a polling worker, calls TryLock and
// sleeps after each refusal.
func (e *etcdService) lock(ctx context.Context, w *worker, m *concurrency.Mutex) error {
	if w.cfg.PollMs <= 0 {
		return m.Lock(ctx)
	}
	for {
		err := m.TryLock(ctx)
		if !errors.Is(err, concurrency.ErrLocked) {
			return err
		}
		w.polls++
		if err := sleep(ctx, time.Duration(w.cfg.PollMs)*time.Millisecond); err != nil {
			return errors.Join(concurrency.ErrLocked, err)
		}
	}
}

// dropIfExpired forgets a session whose lease the cluster no longer
// knows, so that the next attempt grants a new one; the session's own
// Done channel closes only once its keep-alive notices.
func (e *etcdService) dropIfExpired(sess *concurrency.Session) {
	tctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if r, err := e.cli.TimeToLive(tctx, sess.Lease()); err == nil && r.TTL <= 0 && e.sess == sess {
		e.sess.Orphan()
		e.sess = nil
	}
}
