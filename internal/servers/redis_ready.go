package servers

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// waitRedisReady polls PING until PONG. A node still loading its AOF answers
// -LOADING, which counts as not ready: callers expect their data to be there.
func waitRedisReady(ctx context.Context, c *child, addr string, tlsCfg *tls.Config) error {
	var last error
	for {
		if c.exited() {
			return errors.New("process exited")
		}
		if last = pingRedis(ctx, addr, c.pid(), tlsCfg); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last PING: %v)", ctx.Err(), last)
		case <-c.done:
			return errors.New("process exited")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// pingRedis asks the server at addr for INFO server and checks that it is
// the process with pid wantPID (0: any): with ports chosen by closing a
// listener, another server may already own the port our child failed to
// bind, and must not be mistaken for it. It speaks RESP directly, so that
// readiness does not depend on the client library under test or on its
// pool and retry settings. With tlsCfg it speaks TLS.
func pingRedis(ctx context.Context, addr string, wantPID int, tlsCfg *tls.Config) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if tlsCfg != nil {
		tc := tls.Client(conn, tlsCfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			return err
		}
		conn = tc
	}
	if _, err := conn.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	head, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	head = strings.TrimSpace(head)
	if !strings.HasPrefix(head, "$") {
		return fmt.Errorf("INFO answered %q", head)
	}
	n, err := strconv.Atoi(head[1:])
	if err != nil || n < 0 {
		return fmt.Errorf("INFO answered %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if wantPID == 0 {
		return nil
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			if v != strconv.Itoa(wantPID) {
				return fmt.Errorf("%s is answered by another server (pid %s, ours is %d)", addr, v, wantPID)
			}
			return nil
		}
	}
	return errors.New("INFO server has no process_id")
}
