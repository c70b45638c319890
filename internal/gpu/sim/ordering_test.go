package sim

import (
	"io"
	"net"
	"os"
	"testing"

	"github.com/gpufeed/gpufeed/internal/gpu/sim/wire"
	"golang.org/x/sys/unix"
)

// socketPair returns the server's and the client's ends of a connected
// Unix stream socket pair.
func socketPair(t *testing.T) (server, client *net.UnixConn) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	ends := make([]*net.UnixConn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		ends[i] = c.(*net.UnixConn)
		t.Cleanup(func() { c.Close() })
	}
	return ends[0], ends[1]
}

// A connection has caught up with a synchronise sent at time ts only when
// nothing its client sent before ts is left unhandled: not in the socket,
// not read but unhandled; unless it already handled a later request or is
// parked in a blocking call.
func TestCaughtUpWith(t *testing.T) {
	srvEnd, client := socketPair(t)
	cn := &conn{c: srvEnd}
	const ts = 1000
	if !cn.caughtUpWith(ts) {
		t.Fatal("an idle connection with nothing sent has caught up")
	}
	frame := make([]byte, wire.FrameSize)
	if _, err := client.Write(frame); err != nil {
		t.Fatal(err)
	}
	if cn.caughtUpWith(ts) {
		t.Error("a launch still in the socket: not caught up")
	}
	rd := countingReader{srvEnd, &cn.progress.received}
	if _, err := io.ReadFull(rd, frame); err != nil {
		t.Fatal(err)
	}
	if cn.caughtUpWith(ts) {
		t.Error("a launch read but not yet handled: not caught up")
	}
	cn.progress.handled.Add(wire.FrameSize)
	cn.progress.lastTS.Store(ts - 1)
	if !cn.caughtUpWith(ts) {
		t.Error("everything sent handled: caught up")
	}

	if _, err := client.Write(frame); err != nil {
		t.Fatal(err)
	}
	cn.progress.parked.Store(true)
	if !cn.caughtUpWith(ts) {
		t.Error("a connection parked in a blocking call counts as caught up")
	}
	cn.progress.parked.Store(false)
	cn.progress.lastTS.Store(ts)
	if !cn.caughtUpWith(ts) {
		t.Error("a connection that handled a request sent at ts has caught up, whatever follows it")
	}
}
