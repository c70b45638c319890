package agent

import (
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// The agent's HTTP server is bounded in connections and in time, so that
// clients that open connections and send nothing (or send slowly) cannot
// take the descriptors, memory and goroutines the agent needs to watch its
// jobs: a connection past the cap is closed as soon as it is accepted, a
// request's header must arrive within ReadHeaderTimeout, its body within
// ReadTimeout, the response must be written within WriteTimeout, and a
// kept-alive connection idle for IdleTimeout is closed.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	// WriteTimeout covers judging the ring and writing it: a 10-minute
	// ring of a large job is judged in well under a second, written as a
	// few MiB.
	WriteTimeout   = time.Minute
	IdleTimeout    = 30 * time.Second
	MaxHeaderBytes = 16 << 10
	// DefaultMaxConnections is the default cap on open connections: two
	// Prometheus replicas, a few people with curl and the Slurm epilog
	// need a handful.
	DefaultMaxConnections = 64
)

// NewServer returns the agent's HTTP server for h, bounded in time; a
// client on a Unix socket is known by its credentials (SO_PEERCRED) in
// each request's context.
func NewServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnContext:       peerContext,
	}
}

// ConnLimit is a listener that keeps at most max connections open: one
// accepted past the cap is closed at once (shed) rather than left waiting
// in the kernel's backlog, so a flood costs the agent no descriptor.
type ConnLimit struct {
	net.Listener
	slots chan struct{}
	shed  atomic.Uint64
}

// LimitConnections caps l's open connections at max.
func LimitConnections(l net.Listener, max int) *ConnLimit {
	return &ConnLimit{Listener: l, slots: make(chan struct{}, max)}
}

// Accept returns the next connection under the cap, closing those past it.
func (l *ConnLimit) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			_ = c.Close()
			l.shed.Add(1)
		}
	}
}

// Open is the number of connections open; Shed the number closed at once
// because the cap was reached.
func (l *ConnLimit) Open() int      { return len(l.slots) }
func (l *ConnLimit) Shed() uint64   { return l.shed.Load() }
func (l *ConnLimit) Max() int       { return cap(l.slots) }
func (l *ConnLimit) String() string { return l.Addr().String() }

type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

// Unwrap is the accepted connection (a Unix socket's, for its peer's
// credentials).
func (c *limitedConn) Unwrap() net.Conn { return c.Conn }

// peer is the client of a Unix socket connection, as the kernel says it
// (SO_PEERCRED: its credentials when it connected).
type peer struct {
	pid      int32
	uid, gid uint32
}

type peerKey struct{}

func peerContext(ctx context.Context, c net.Conn) context.Context {
	for {
		u, ok := c.(interface{ Unwrap() net.Conn })
		if !ok {
			break
		}
		c = u.Unwrap()
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return context.WithValue(ctx, peerKey{}, (*peer)(nil))
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil || credErr != nil {
		// Unknown credentials: the client is treated as no user at all.
		return context.WithValue(ctx, peerKey{}, (*peer)(nil))
	}
	return context.WithValue(ctx, peerKey{}, &peer{pid: cred.Pid, uid: cred.Uid, gid: cred.Gid})
}

// viewer is who asks for a job's details: everyone (all) for a client of
// the TCP listener when detail is served there (authenticated by the web
// configuration), or a Unix socket's client known by its uid.
type viewer struct {
	all  bool
	peer *peer // nil when all, or when the credentials are unknown
}

func viewerOf(r *http.Request) viewer {
	v, ok := r.Context().Value(peerKey{}).(*peer)
	if !ok {
		return viewer{all: true}
	}
	if v != nil && v.uid == 0 {
		return viewer{all: true, peer: v}
	}
	return viewer{peer: v}
}

func (v viewer) String() string {
	if v.peer == nil {
		return "a client of unknown credentials"
	}
	return "uid " + strconv.FormatUint(uint64(v.peer.uid), 10)
}

// mayRead says whether the viewer may read the job's details: root (or an
// authenticated TCP client) any job, another user the jobs whose root
// process ran with its uid as real, effective and saved uid, as the kernel
// lets a user read another process's /proc files (PTRACE_MODE_READ).
func (v viewer) mayRead(j *job) bool {
	if v.all {
		return true
	}
	if v.peer == nil || !j.uidsKnown {
		return false
	}
	for _, u := range j.uids {
		if u != v.peer.uid {
			return false
		}
	}
	return true
}

// mayReadKernelLog says whether the viewer could read the kernel log
// itself: always unless kernel.dmesg_restrict is 1, then only with
// CAP_SYSLOG in its effective set (read from its /proc status; a client
// whose status cannot be read has not got it).
func (v viewer) mayReadKernelLog(proc string) bool {
	if v.all {
		return true
	}
	b, err := os.ReadFile(proc + "/sys/kernel/dmesg_restrict")
	if err == nil && strings.TrimSpace(string(b)) == "0" {
		return true
	}
	if v.peer == nil || v.peer.pid <= 0 {
		return false
	}
	caps, err := bpfcap.EffectiveCaps(proc + "/" + strconv.Itoa(int(v.peer.pid)) + "/status")
	return err == nil && caps&(1<<capSyslog) != 0
}

// capSyslog is CAP_SYSLOG's number (linux/capability.h).
const capSyslog = 34

// statusField reads one line of a /proc status file: its value after the
// colon, spaces trimmed.
func statusField(path, key string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	return procfs.Field(b, key)
}

// readUIDs reads a process's real, effective and saved uids.
func readUIDs(path string) ([3]uint32, bool) {
	var out [3]uint32
	v, ok := statusField(path, "Uid")
	if !ok {
		return out, false
	}
	f := strings.Fields(v)
	if len(f) < 3 {
		return out, false
	}
	for i := range out {
		n, err := strconv.ParseUint(f[i], 10, 32)
		if err != nil {
			return out, false
		}
		out[i] = uint32(n)
	}
	return out, true
}
