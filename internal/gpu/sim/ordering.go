package sim

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu/sim/wire"
	"golang.org/x/sys/unix"
)

// Each thread of a workload has its own connection (the clients keep one
// per thread), and the server reads each connection on its own goroutine.
// CUDA orders a thread's synchronise after every launch the process made
// before it, whichever thread made them; here, another thread's launches
// can still sit unread in its socket when the synchronise arrives. So a
// synchronise first waits until the process's other connections on the
// device have caught up with it (progress below), for at most
// catchUpLimit.

// catchUpLimit bounds that wait: a peer that does not catch up in this time
// is not draining its socket for some other reason, and the synchronise goes
// on with what was submitted.
const catchUpLimit = 50 * time.Millisecond

// catchUpPoll is how often the waiting synchronise looks again.
const catchUpPoll = 50 * time.Microsecond

// progress is what a connection's reader publishes for other connections
// of the same process.
type progress struct {
	received atomic.Int64 // bytes read from the socket
	handled  atomic.Int64 // bytes of requests handled (submitted or answered)
	lastTS   atomic.Int64 // client time (server clock) of the last request handled
	parked   atomic.Bool  // blocked in a call that lets its thread send nothing more
}

// countingReader counts the bytes a connection's reader takes off the socket.
type countingReader struct {
	c *net.UnixConn
	n *atomic.Int64
}

func (r countingReader) Read(p []byte) (int, error) {
	n, err := r.c.Read(p)
	r.n.Add(int64(n))
	return n, err
}

// caughtUpWith reports whether every request this connection's client sent
// before client time ts has been handled: it handled a request sent at or
// after ts, or it holds nothing unread (in the socket or in its reader's
// buffer), or it is parked in a blocking call (its thread can send nothing
// until that returns).
func (cn *conn) caughtUpWith(ts int64) bool {
	p := &cn.progress
	if p.parked.Load() || p.lastTS.Load() >= ts {
		return true
	}
	// The socket first: bytes still in it are unread whatever the counters
	// say; then bytes read but not yet handled.
	if cn.unreadInSocket() > 0 {
		return false
	}
	return p.received.Load() == p.handled.Load()
}

// unreadInSocket is the number of bytes waiting in the socket (SIOCINQ);
// unknown counts as some.
func (cn *conn) unreadInSocket() int {
	raw, err := cn.c.SyscallConn()
	if err != nil {
		return 1
	}
	n := 1
	raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}

// awaitPeers waits until the process's other workload connections on this
// device have caught up with a synchronise sent at client time ts. A peer
// must be seen caught up on two looks in a row: between a read taking bytes
// off the socket and its count being published lies a moment in which the
// bytes are in neither place.
func (cn *conn) awaitPeers(ts int64) {
	s := cn.srv
	s.mu.Lock()
	var peers []*conn
	for other := range s.conns {
		if other != cn && other.role == wire.RoleWorkload && other.pid == cn.pid && other.dev == cn.dev {
			peers = append(peers, other)
		}
	}
	s.mu.Unlock()
	deadline := time.Now().Add(catchUpLimit)
	for _, peer := range peers {
		seen := 0
		for seen < 2 && time.Now().Before(deadline) {
			if peer.caughtUpWith(ts) {
				seen++
			} else {
				seen = 0
			}
			time.Sleep(catchUpPoll)
		}
	}
}
