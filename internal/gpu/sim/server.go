package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpu/sim/wire"
	"golang.org/x/sys/unix"
)

// MaxCopyBytes bounds one copy (1 TiB): larger is a client bug, not a workload.
const MaxCopyBytes = 1 << 40

// Server is a simulated device (one or more GPUs) listening on a Unix socket.
type Server struct {
	opt  Options
	path string
	ln   *net.UnixListener

	mu      sync.Mutex // guards devs, conns, nextObs
	devs    []*device
	conns   map[*conn]struct{}
	nextObs int

	done chan struct{} // closed when the server stops
	once sync.Once
	wg   sync.WaitGroup
}

// Listen creates the socket at path and returns a server ready to Serve.
// Clients may connect as soon as Listen returns. A stale socket file (nobody
// listening) is replaced; a live one is an error.
func Listen(path string, opt Options) (*Server, error) {
	if err := opt.checkGiven(); err != nil {
		return nil, err
	}
	opt = opt.withDefaults()
	if err := opt.validate(); err != nil {
		return nil, err
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("simulated device: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	now := wire.Now()
	s := &Server{opt: opt, path: path, ln: ln, conns: map[*conn]struct{}{}, done: make(chan struct{})}
	for i := range opt.Devices {
		s.devs = append(s.devs, newDevice(i, opt, now))
	}
	return s, nil
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("simulated device socket %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("simulated device socket %s: the path exists and is not a socket", path)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("simulated device socket %s: another server is listening there", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("simulated device socket %s: removing the stale socket: %w", path, err)
	}
	return nil
}

// Serve starts a simulated device at path and serves it until ctx ends.
func Serve(ctx context.Context, path string, opt Options) error {
	s, err := Listen(path, opt)
	if err != nil {
		return err
	}
	return s.Serve(ctx)
}

// Path returns the socket's path.
func (s *Server) Path() string { return s.path }

// Serve accepts clients until ctx ends or Close is called, then closes every
// connection, removes the socket and returns.
func (s *Server) Serve(ctx context.Context) error {
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-s.done:
		}
	}()
	var err error
	for {
		c, aerr := s.ln.AcceptUnix()
		if aerr != nil {
			select {
			case <-s.done:
			default:
				err = fmt.Errorf("simulated device: accept: %w", aerr)
				s.Close()
			}
			break
		}
		cn := &conn{srv: s, c: c}
		s.mu.Lock()
		select {
		case <-s.done: // Close ran between Accept and here: it did not see this one
			s.mu.Unlock()
			c.Close()
			continue
		default:
		}
		s.conns[cn] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			cn.serve()
		}()
	}
	s.wg.Wait()
	return err
}

// Close stops the server: the listener and every client connection close.
func (s *Server) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.ln.Close()
		s.mu.Lock()
		for cn := range s.conns {
			cn.c.Close()
		}
		s.mu.Unlock()
	})
	return nil
}

// conn is one client connection: a workload (a process submitting work to
// one device) or an observer (a gpu.Source reading every device).
type conn struct {
	srv *Server
	c   *net.UnixConn

	wmu sync.Mutex // serialises writes: timers reply while serve reads

	pid    int
	dev    *device // workload connections
	role   uint8
	obsID  int
	offset int64 // added to client timestamps (another time namespace)

	progress progress // read by the process's other connections (ordering.go)
}

// requestError is a protocol violation: answered with its status, then the
// connection closes.
type requestError struct {
	status uint8
	msg    string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &requestError{status: wire.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

func (cn *conn) serve() {
	defer cn.close()
	cn.pid = peerPID(cn.c)
	rd := bufio.NewReaderSize(countingReader{cn.c, &cn.progress.received}, 64<<10)
	var buf [wire.FrameSize]byte
	helloed := false
	for {
		if _, err := io.ReadFull(rd, buf[:]); err != nil {
			return // EOF, or the server closed the connection
		}
		req := wire.DecodeRequest(buf[:])
		var err error
		switch {
		case !helloed && req.Op != wire.OpHello:
			err = badRequest("first request must be hello, got %s", req.Op)
		case helloed && req.Op == wire.OpHello:
			err = badRequest("hello sent twice")
		case req.Op == wire.OpHello:
			err = cn.hello(req)
			helloed = err == nil
		default:
			err = cn.handle(req)
		}
		cn.progress.lastTS.Store(req.TS + cn.offset)
		cn.progress.handled.Add(wire.FrameSize)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) {
				return
			}
			cn.write(wire.Reply{Op: req.Op, Status: re.status, Seq: req.Seq}, []byte(re.msg))
			return
		}
	}
}

func (cn *conn) close() {
	s := cn.srv
	s.mu.Lock()
	delete(s.conns, cn)
	switch {
	case cn.role == wire.RoleObserver && cn.obsID != 0:
		for _, d := range s.devs {
			d.removeObserver(cn.obsID)
		}
	case cn.dev != nil:
		cn.dev.detach(cn.pid)
	}
	s.mu.Unlock()
	cn.c.Close()
}

func (cn *conn) hello(req wire.Request) error {
	s := cn.srv
	if req.Arg != wire.Version {
		return &requestError{status: wire.StatusVersion, msg: fmt.Sprintf("protocol version %d not served (this server speaks %d)", req.Arg, wire.Version)}
	}
	now := wire.Now()
	// A client in another time namespace has another CLOCK_MONOTONIC; a gap
	// of more than a second cannot be socket latency, so it is corrected.
	if gap := now - req.TS; gap > int64(time.Second) || gap < -int64(time.Second) {
		cn.offset = gap
	}
	cn.role = req.Kind
	s.mu.Lock()
	switch req.Kind {
	case wire.RoleWorkload:
		if int(req.Stream) >= len(s.devs) {
			s.mu.Unlock()
			return &requestError{status: wire.StatusNoDevice, msg: fmt.Sprintf("no simulated device %d (this server has %d)", req.Stream, len(s.devs))}
		}
		cn.dev = s.devs[req.Stream]
		cn.dev.attach(cn.pid)
	case wire.RoleObserver:
		s.nextObs++
		cn.obsID = s.nextObs
		for _, d := range s.devs {
			d.addObserver(cn.obsID, now)
		}
	default:
		s.mu.Unlock()
		return badRequest("unknown hello role %d", req.Kind)
	}
	s.mu.Unlock()
	bw := s.opt.pinnedBandwidth()
	h := wire.Hello{
		Protocol:   wire.Version,
		Device:     int(req.Stream),
		Devices:    len(s.devs),
		PID:        cn.pid,
		MaxPending: s.opt.MaxPending,
		Bandwidth: map[string]float64{
			"h2d": bw[wire.CopyH2D], "d2h": bw[wire.CopyD2H], "d2d": bw[wire.CopyD2D],
		},
		PageableFactor: s.opt.PageableFactor,
		ClockOffsetNS:  cn.offset,
	}
	p, _ := json.Marshal(h)
	return cn.write(wire.Reply{Op: wire.OpHello, Time: now, Seq: req.Seq}, p)
}

func (cn *conn) handle(req wire.Request) error {
	switch req.Op {
	case wire.OpLaunch, wire.OpMemcpy, wire.OpSync, wire.OpSyncDevice:
		if cn.role != wire.RoleWorkload {
			return &requestError{status: wire.StatusWrongRole, msg: req.Op.String() + " on an observer connection"}
		}
	case wire.OpInfo, wire.OpSample:
		if cn.role != wire.RoleObserver {
			return &requestError{status: wire.StatusWrongRole, msg: req.Op.String() + " on a workload connection"}
		}
	}
	switch req.Op {
	case wire.OpLaunch:
		if req.Arg > uint64(MaxOpDuration) {
			return badRequest("kernel of %d ns: at most %d ns", req.Arg, int64(MaxOpDuration))
		}
		return cn.submit(req, op{kind: opKernel, dur: int64(req.Arg)})
	case wire.OpMemcpy:
		if req.Kind > wire.CopyD2D {
			return badRequest("copy kind %d: want 0 (h2d), 1 (d2h) or 2 (d2d)", req.Kind)
		}
		if req.Arg > MaxCopyBytes {
			return badRequest("copy of %d bytes: at most %d", req.Arg, uint64(MaxCopyBytes))
		}
		return cn.submit(req, op{kind: opCopy, bytes: req.Arg, dir: req.Kind, pinned: req.Flags&wire.FlagPinned != 0})
	case wire.OpSync, wire.OpSyncDevice:
		// Another thread's launches made before this call count too.
		cn.progress.parked.Store(true)
		cn.awaitPeers(req.TS + cn.offset)
		cn.progress.parked.Store(false)
		s := cn.srv
		s.mu.Lock()
		target := cn.dev.syncTarget(cn.pid, req.Stream, req.Op == wire.OpSyncDevice)
		s.mu.Unlock()
		cn.replyAt(target, wire.Reply{Op: req.Op, Time: target, Seq: req.Seq})
		return nil
	case wire.OpInfo:
		s := cn.srv
		infos := make([]gpu.DeviceInfo, 0, len(s.devs))
		s.mu.Lock()
		for _, d := range s.devs {
			infos = append(infos, d.info())
		}
		s.mu.Unlock()
		p, _ := json.Marshal(infos)
		return cn.write(wire.Reply{Op: req.Op, Time: wire.Now(), Seq: req.Seq}, p)
	case wire.OpSample:
		s := cn.srv
		samples := make([]gpu.Sample, 0, len(s.devs))
		s.mu.Lock()
		now := wire.Now()
		for _, d := range s.devs {
			samples = append(samples, d.sample(cn.obsID, now))
		}
		s.mu.Unlock()
		p, _ := json.Marshal(samples)
		return cn.write(wire.Reply{Op: req.Op, Time: now, Seq: req.Seq}, p)
	}
	return badRequest("unknown operation %d", uint8(req.Op))
}

// submit enqueues a kernel or copy. While the stream is full it waits (the
// connection reads nothing more, as a CUDA launch into a full stream blocks
// its thread) and the operation counts as submitted when the stream had room.
// A pageable copy, or a request flagged for a reply, is answered: the copy at
// its end (CUDA returns once it is done), the flagged request once enqueued.
func (cn *conn) submit(req wire.Request, o op) error {
	s := cn.srv
	ts := req.TS + cn.offset
	for {
		s.mu.Lock()
		d := cn.dev
		if !d.canAddStream(cn.pid, req.Stream) {
			s.mu.Unlock()
			return badRequest("stream %d: a process may use at most %d streams", req.Stream, MaxStreamsPerProcess)
		}
		now := wire.Now()
		room := d.roomAt(cn.pid, req.Stream, now)
		if room == 0 {
			_, end := d.submit(cn.pid, req.Stream, o, d.submitTime(ts, now))
			s.mu.Unlock()
			switch {
			case o.kind == opCopy && !o.pinned && o.dir != wire.CopyD2D:
				cn.replyAt(end, wire.Reply{Op: req.Op, Time: end, Seq: req.Seq})
			case req.Flags&wire.FlagReply != 0:
				cn.write(wire.Reply{Op: req.Op, Time: end, Seq: req.Seq}, nil)
			}
			return nil
		}
		s.mu.Unlock()
		ts = max(ts, room)
		// Held for room, this thread can send nothing more: the process's
		// synchronising threads need not wait for it (ordering.go).
		cn.progress.parked.Store(true)
		ok := cn.sleepUntil(room)
		cn.progress.parked.Store(false)
		if !ok {
			return io.EOF
		}
	}
}

// peerCheckInterval is how often a connection held on a full stream checks
// that its client is still there, so a killed client's connection does not
// linger until the stream drains.
const peerCheckInterval = 50 * time.Millisecond

// sleepUntil waits, on a timer, until CLOCK_MONOTONIC reaches t; false when
// the server stopped or the client went away meanwhile.
func (cn *conn) sleepUntil(t int64) bool {
	for {
		d := t - wire.Now()
		if d <= 0 {
			return true
		}
		tm := time.NewTimer(min(time.Duration(d), peerCheckInterval))
		select {
		case <-tm.C:
			if cn.peerGone() {
				return false
			}
		case <-cn.srv.done:
			tm.Stop()
			return false
		}
	}
}

// peerGone peeks at the socket without consuming anything: end of file means
// the client closed its end.
func (cn *conn) peerGone() bool {
	raw, err := cn.c.SyscallConn()
	if err != nil {
		return true
	}
	gone := false
	var b [1]byte
	raw.Read(func(fd uintptr) bool {
		n, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		gone = n == 0 && err == nil
		return true // never wait for readiness
	})
	return gone
}

// replyAt sends r once CLOCK_MONOTONIC has reached t (at once if it has), from
// a timer, so the connection keeps reading meanwhile.
func (cn *conn) replyAt(t int64, r wire.Reply) {
	d := t - wire.Now()
	if d <= 0 {
		cn.write(r, nil)
		return
	}
	var fire func()
	fire = func() {
		if rest := t - wire.Now(); rest > 0 {
			time.AfterFunc(time.Duration(rest), fire)
			return
		}
		cn.write(r, nil)
	}
	time.AfterFunc(time.Duration(d), fire)
}

func (cn *conn) write(r wire.Reply, payload []byte) error {
	b := wire.AppendReply(make([]byte, 0, wire.FrameSize+len(payload)), r, payload)
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	_, err := cn.c.Write(b)
	return err
}

// peerPID returns the client's PID from SO_PEERCRED (0 when unavailable).
func peerPID(c *net.UnixConn) int {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

func simUUID(index int) string { return "GPU-SIM-" + strconv.Itoa(index) }

func itoa(v int) string { return strconv.Itoa(v) }
