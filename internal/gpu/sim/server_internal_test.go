package sim

import (
	"context"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu/sim/wire"
)

// A client killed while blocked on a full stream must not leave its
// connection behind until the stream drains (here: ten minutes).
func TestClientGoneWhileBlockedIsForgotten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpu.sock")
	srv, err := Listen(path, Options{MaxPending: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx)
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	send := func(r wire.Request) {
		var b [wire.FrameSize]byte
		r.Encode(b[:])
		if _, err := c.Write(b[:]); err != nil {
			t.Fatal(err)
		}
	}
	send(wire.Request{Op: wire.OpHello, Arg: wire.Version, TS: wire.Now()})
	if _, _, err := wire.ReadReply(c); err != nil {
		t.Fatal(err)
	}
	for range 3 { // the third waits ten minutes for room
		send(wire.Request{Op: wire.OpLaunch, Arg: uint64(10 * time.Minute), TS: wire.Now()})
	}
	conns := func() int {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns)
	}
	for deadline := time.Now().Add(5 * time.Second); conns() != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the connection never registered")
		}
	}
	c.Close()
	for deadline := time.Now().Add(5 * time.Second); conns() != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server still holds the connection of a client that went away while blocked")
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for pid, pr := range srv.devs[0].procs {
		if pr.conns != 0 {
			t.Errorf("process %d still counted as connected (%d)", pid, pr.conns)
		}
	}
}
