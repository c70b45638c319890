package sim

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/sim/simcuda"
	"github.com/gpufeed/gpufeed/internal/sim/wire"
	"golang.org/x/sys/unix"
)

// MaxCopyBytes bounds one copy (1 TiB): larger is a client bug, not a workload.
const MaxCopyBytes = 1 << 40

// readEvery is how often the server reads every context's ring even when
// nobody samples and no ring fills: the processes' completed operations
// and the history stay current. Reading an empty ring is one atomic load.
const readEvery = 200 * time.Millisecond

// Server is a simulated device (one or more GPUs) listening on a Unix socket.
type Server struct {
	opt  Options
	path string
	ln   *net.UnixListener

	mu      sync.Mutex // guards devs, conns, nextObs, nextReg and every ring's reading
	devs    []*device
	devShm  []*shm // each device's shared region (copy engines)
	conns   map[*conn]struct{}
	nextObs int
	nextReg uint64

	libOnce sync.Once
	lib     string
	libErr  string

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
		m, err := newShm("gpufeed-simdev-device", wire.DeviceShmSize)
		if err != nil {
			s.closeShm()
			ln.Close()
			return nil, fmt.Errorf("simulated device: %w", err)
		}
		le32(m.b[0:], wire.DeviceMagic)
		le32(m.b[4:], wire.ShmVersion)
		s.devShm = append(s.devShm, m)
	}
	return s, nil
}

func (s *Server) closeShm() {
	for _, m := range s.devShm {
		m.close()
	}
	s.devShm = nil
}

// library is the simulated driver library built from this server's own
// source, or why there is none; built on first ask.
func (s *Server) library() (string, string) {
	s.libOnce.Do(func() {
		build := s.opt.Library
		if build == nil {
			build = simcuda.Path
		}
		p, err := build()
		if err != nil {
			s.libErr = err.Error()
			return
		}
		s.lib = p
	})
	return s.lib, s.libErr
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
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(readEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				s.mu.Lock()
				s.readRings(wire.Now())
				s.mu.Unlock()
			case <-s.done:
				return
			}
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
	s.mu.Lock()
	s.closeShm()
	s.mu.Unlock()
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

// conn is one client connection: a context of a workload (its ring and its
// device channel), a thread's waiter, an observer (a gpu.Source reading
// every device) or a query.
type conn struct {
	srv *Server
	c   *net.UnixConn

	wmu sync.Mutex // serialises writes: timers reply while serve reads

	pid    int
	role   uint8
	dev    *device // workload and waiter connections
	obsID  int
	offset int64 // added to client timestamps (another time namespace)

	// A workload's context: its registration and the ring it writes.
	reg     uint64
	ring    *shm
	ringCap uint64
	tail    uint64
	refused error // set when its ring held what no library writes
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
	rd := bufio.NewReaderSize(cn.c, 4<<10)
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
			if err == nil && cn.role == wire.RoleQuery {
				return
			}
		default:
			err = cn.handle(req)
		}
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) {
				return
			}
			cn.write(wire.Reply{Op: req.Op, Status: re.status, Seq: req.Seq}, []byte(re.msg), nil)
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
	case cn.ring != nil:
		// The context is gone (destroyed, or its process ended): what it
		// wrote last still counts.
		now := wire.Now()
		cn.readRing(now)
		cn.dev.forget(cn.pid, cn.reg, now)
		cn.dev.detach(cn.pid)
		cn.ring.close()
		cn.ring = nil
	}
	s.mu.Unlock()
	cn.c.Close()
}

func (cn *conn) hello(req wire.Request) error {
	s := cn.srv
	if req.Arg != wire.Version {
		return &requestError{status: wire.StatusVersion, msg: fmt.Sprintf("protocol version %d not served (this server speaks %d: the client and the server come from different gpufeed versions)", req.Arg, wire.Version)}
	}
	now := wire.Now()
	// A client in another time namespace has another CLOCK_MONOTONIC; a gap
	// of more than a second cannot be socket latency, so it is corrected.
	if gap := now - req.TS; gap > int64(time.Second) || gap < -int64(time.Second) {
		cn.offset = gap
	}
	cn.role = req.Kind
	switch req.Kind {
	case wire.RoleWorkload, wire.RoleWaiter:
		if int(req.Stream) >= len(s.devs) {
			return &requestError{status: wire.StatusNoDevice, msg: fmt.Sprintf("no simulated device %d (this server has %d)", req.Stream, len(s.devs))}
		}
		if req.Kind == wire.RoleWorkload {
			return cn.register(int(req.Stream), req.Seq, now)
		}
		s.mu.Lock()
		cn.dev = s.devs[req.Stream]
		s.mu.Unlock()
		return cn.write(wire.Reply{Op: wire.OpHello, Time: now, Value: uint64(len(s.devs)), Seq: req.Seq}, nil, nil)
	case wire.RoleObserver:
		s.mu.Lock()
		s.nextObs++
		cn.obsID = s.nextObs
		// What the rings hold so far belongs before the observer's first window.
		s.readRings(now)
		for _, d := range s.devs {
			d.addObserver(cn.obsID, now)
		}
		s.mu.Unlock()
		return cn.write(wire.Reply{Op: wire.OpHello, Time: now, Value: uint64(len(s.devs)), Seq: req.Seq}, nil, nil)
	case wire.RoleQuery:
		lib, why := s.library()
		p, _ := json.Marshal(wire.Query{Protocol: wire.Version, Devices: len(s.devs), Library: lib, LibraryError: why})
		return cn.write(wire.Reply{Op: wire.OpHello, Time: now, Value: uint64(len(s.devs)), Seq: req.Seq}, p, nil)
	}
	return badRequest("unknown hello role %d", req.Kind)
}

// register makes the connection a context on device index: a ring of its
// own, the device's shared region, and what the library needs to know.
func (cn *conn) register(index int, seq uint64, now int64) error {
	s := cn.srv
	capacity := s.opt.RingCapacity
	ring, err := newShm("gpufeed-simdev-ring", wire.RingBytes(capacity))
	if err != nil {
		return &requestError{status: wire.StatusNoDevice, msg: "cannot make the context's shared memory: " + err.Error()}
	}
	le32(ring.b[0:], wire.RingMagic)
	le32(ring.b[4:], wire.ShmVersion)
	le32(ring.b[8:], uint32(capacity))
	le32(ring.b[12:], wire.RecordSize)
	s.mu.Lock()
	s.nextReg++
	cn.reg = s.nextReg
	cn.dev = s.devs[index]
	cn.ring, cn.ringCap = ring, uint64(capacity)
	cn.dev.attach(cn.pid)
	devFD := s.devShm[index].fd
	s.mu.Unlock()
	bw := s.opt.pinnedBandwidth()
	reg := wire.Registration{
		Device: index, Devices: len(s.devs), PID: cn.pid, ClockOffsetNS: cn.offset, ID: cn.reg,
		MaxPending: s.opt.MaxPending, RingCapacity: capacity, Bandwidth: bw, PageableFactor: s.opt.PageableFactor,
		LaunchCostNS: uint64(s.opt.LaunchCost), MemTotalBytes: s.opt.MemTotalBytes, Name: s.opt.Name,
	}
	err = cn.write(wire.Reply{Op: wire.OpHello, Time: now, Value: uint64(len(s.devs)), Seq: seq}, reg.Encode(), unix.UnixRights(devFD, ring.fd))
	ring.closeFD() // the client has its own descriptor now; the mapping stays
	return err
}

func (cn *conn) handle(req wire.Request) error {
	switch req.Op {
	case wire.OpNudge:
		if cn.role != wire.RoleWorkload {
			return &requestError{status: wire.StatusWrongRole, msg: "nudge on a connection that is not a context's"}
		}
		s := cn.srv
		s.mu.Lock()
		cn.readRing(wire.Now())
		err := cn.refused
		s.mu.Unlock()
		if err != nil {
			return badRequest("%v", err)
		}
		return nil
	case wire.OpWait:
		if cn.role != wire.RoleWorkload && cn.role != wire.RoleWaiter {
			return &requestError{status: wire.StatusWrongRole, msg: "wait on an observer connection"}
		}
		t := int64(req.Arg) - cn.offset
		if limit := wire.Now() + cn.dev.maxFuture(); t > limit || t < 0 {
			return badRequest("wait until %d: not a time this device can reach", req.Arg)
		}
		cn.replyAt(t, wire.Reply{Op: req.Op, Time: int64(req.Arg), Seq: req.Seq})
		return nil
	case wire.OpInfo, wire.OpSample:
		if cn.role != wire.RoleObserver {
			return &requestError{status: wire.StatusWrongRole, msg: req.Op.String() + " on a connection that is not an observer's"}
		}
	default:
		return badRequest("unknown operation %d", uint8(req.Op))
	}
	s := cn.srv
	if req.Op == wire.OpInfo {
		infos := make([]gpu.DeviceInfo, 0, len(s.devs))
		s.mu.Lock()
		for _, d := range s.devs {
			infos = append(infos, d.info())
		}
		s.mu.Unlock()
		p, _ := json.Marshal(infos)
		return cn.write(wire.Reply{Op: req.Op, Time: wire.Now(), Seq: req.Seq}, p, nil)
	}
	samples := make([]gpu.Sample, 0, len(s.devs))
	s.mu.Lock()
	now := wire.Now()
	s.readRings(now)
	for _, d := range s.devs {
		samples = append(samples, d.sample(cn.obsID, now))
	}
	s.mu.Unlock()
	p, _ := json.Marshal(samples)
	return cn.write(wire.Reply{Op: req.Op, Time: now, Seq: req.Seq}, p, nil)
}

// readRings reads every context's ring; s.mu held.
func (s *Server) readRings(now int64) {
	for cn := range s.conns {
		if cn.ring != nil && cn.refused == nil {
			cn.readRing(now)
			if cn.refused != nil {
				// Say why on the context's channel and close it: the library
				// finds out at its next nudge or blocking call.
				go func(cn *conn, why error) {
					cn.write(wire.Reply{Op: wire.OpNudge, Status: wire.StatusBadRequest}, []byte(why.Error()), nil)
					cn.c.Close()
				}(cn, cn.refused)
			}
		}
	}
}

// readRing takes the records the context wrote since the last reading into
// the model; s.mu held. A ring that holds what no library writes is
// refused: nothing more is read from it.
func (cn *conn) readRing(now int64) {
	if cn.ring == nil || cn.refused != nil {
		return
	}
	b := cn.ring.b
	head := (*atomic.Uint64)(unsafe.Pointer(&b[wire.RingHeadOffset])).Load()
	if head-cn.tail > cn.ringCap {
		cn.refused = fmt.Errorf("the context's ring says %d records are unread, it holds %d", head-cn.tail, cn.ringCap)
		return
	}
	for ; cn.tail != head; cn.tail++ {
		off := wire.RingRecordStart + int(cn.tail%cn.ringCap)*wire.RecordSize
		r := wire.DecodeRecord(b[off : off+wire.RecordSize])
		r.Start -= cn.offset
		r.End -= cn.offset
		if err := cn.dev.record(cn.pid, cn.reg, r, now); err != nil {
			cn.refused = fmt.Errorf("record %d of the context's ring: %w", cn.tail, err)
			break
		}
	}
	(*atomic.Uint64)(unsafe.Pointer(&b[wire.RingTailOffset])).Store(cn.tail)
}

// replyAt sends r once CLOCK_MONOTONIC has reached t (at once if it has), from
// a timer, so the connection keeps reading meanwhile.
func (cn *conn) replyAt(t int64, r wire.Reply) {
	d := t - wire.Now()
	if d <= 0 {
		cn.write(r, nil, nil)
		return
	}
	var fire func()
	fire = func() {
		if rest := t - wire.Now(); rest > 0 {
			time.AfterFunc(time.Duration(rest), fire)
			return
		}
		cn.write(r, nil, nil)
	}
	time.AfterFunc(time.Duration(d), fire)
}

func (cn *conn) write(r wire.Reply, payload, oob []byte) error {
	b := wire.AppendReply(make([]byte, 0, wire.FrameSize+len(payload)), r, payload)
	cn.wmu.Lock()
	defer cn.wmu.Unlock()
	if oob != nil {
		_, _, err := cn.c.WriteMsgUnix(b, oob, nil)
		return err
	}
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

func le32(b []byte, v uint32) { binary.LittleEndian.PutUint32(b, v) }
