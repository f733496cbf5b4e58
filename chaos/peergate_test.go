package chaos

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestPeerGate: a gate passes requests and streams, refuses a target it
// was told to (breaking off a stream under way), refuses everything when
// its member is cut off, and passes again once healed; closed, it
// leaves no goroutine behind (the etcd-3 topology starts three gates per
// cluster, one cluster per run).
func TestPeerGate(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/stream" { // raft's long-lived stream: a line every 10 ms
			for i := 0; r.Context().Err() == nil; i++ {
				fmt.Fprintf(w, "%d\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(10 * time.Millisecond)
			}
			return
		}
		fmt.Fprint(w, "ok")
	}))
	defer srv.Close()
	g, err := newPeerGate()
	if err != nil {
		t.Fatal(err)
	}
	defer g.close()
	gu, _ := url.Parse("http://" + g.Addr())
	cli := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(gu), DisableKeepAlives: true}, Timeout: 2 * time.Second}
	get := func() error {
		resp, err := cli.Get(srv.URL + "/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	if err := get(); err != nil {
		t.Fatalf("through an open gate: %v", err)
	}
	stream := &http.Transport{Proxy: http.ProxyURL(gu)}
	defer stream.CloseIdleConnections()
	resp, err := (&http.Client{Transport: stream}).Get(srv.URL + "/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatalf("the stream sent nothing: %v", sc.Err())
	}
	target := strings.TrimPrefix(srv.URL, "http://")
	g.refuse(target, true)
	ended := make(chan struct{})
	go func() {
		for sc.Scan() {
		}
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(2 * time.Second):
		t.Error("the stream under way was not broken off when its target was refused")
	}
	if err := get(); err == nil {
		t.Error("a refused target was reached")
	}
	g.refuse(target, false)
	if err := get(); err != nil {
		t.Errorf("after the target was admitted again: %v", err)
	}
	g.refuseAll(true)
	if err := get(); err == nil {
		t.Error("a gate that refuses everything let a request through")
	}
	g.refuseAll(false)
	if err := get(); err != nil {
		t.Errorf("after the gate was opened again: %v", err)
	}
}
