package chaos

import (
	"bufio"
	"errors"
	"net"
	"testing"
	"time"
)

// echo serves one line-echo server for the proxy tests.
func echo(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					s, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(s)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return l.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	t0 := time.Now()
	_ = c.SetDeadline(t0.Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return 0, err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return time.Since(t0), err
}

func TestChaosProxy(t *testing.T) {
	p, err := newProxy(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := roundTrip(t, c, time.Second); err != nil {
		t.Fatalf("plain: %v", err)
	}
	p.SetLatency(50 * time.Millisecond)
	if d, err := roundTrip(t, c, time.Second); err != nil || d < 50*time.Millisecond {
		t.Fatalf("latency: %v after %v, want >= 50ms", err, d)
	}
	p.SetLatency(0)
	if d, err := roundTrip(t, c, time.Second); err != nil || d >= 50*time.Millisecond {
		t.Fatalf("latency off: %v after %v, want < 50ms", err, d)
	}
	p.Blackhole(true)
	// Silence, not a closed connection: the read times out.
	var ne net.Error
	if _, err := roundTrip(t, c, 100*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("blackhole: got %v, want a timeout", err)
	}
	p.Heal()
	c2, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := roundTrip(t, c2, time.Second); err != nil {
		t.Fatalf("healed: %v", err)
	}
	p.Cut(true)
	if _, err := roundTrip(t, c2, time.Second); err == nil {
		t.Fatal("cut: the open connection still works")
	}
	// A new connection is reset at its first bytes, at once: not silence.
	if c, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		start := time.Now()
		_, err := roundTrip(t, c, time.Second)
		c.Close()
		var ne net.Error
		if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
			t.Fatalf("cut: a new connection got %v after %v, want it reset at once", err, time.Since(start))
		}
	}
	p.Cut(false)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatalf("cut off: %v", err)
	}
	defer c3.Close()
	if _, err := roundTrip(t, c3, time.Second); err != nil {
		t.Fatalf("cut off: %v", err)
	}

	// Retarget: same address, another server, open connections closed.
	other := echo(t)
	addr := p.Addr()
	p.Retarget(other)
	if p.Addr() != addr || p.Target() != other {
		t.Fatalf("retarget: listening on %s to %s, want %s to %s", p.Addr(), p.Target(), addr, other)
	}
	if _, err := roundTrip(t, c3, time.Second); err == nil {
		t.Fatal("retarget: the old connection still works")
	}
	c4, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c4.Close()
	if _, err := roundTrip(t, c4, time.Second); err != nil {
		t.Fatalf("retargeted: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("closed: a new connection was accepted")
	}
}
