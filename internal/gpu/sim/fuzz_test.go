package sim_test

import (
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/wire"
	"golang.org/x/sys/unix"
)

func frame(r wire.Request) []byte {
	var b [wire.FrameSize]byte
	r.Encode(b[:])
	return b[:]
}

// FuzzServerInput feeds arbitrary bytes to the server as a client would: it
// must refuse or ignore them, never crash, and keep serving others.
func FuzzServerInput(f *testing.F) {
	hello := frame(wire.Request{Op: wire.OpHello, Arg: wire.Version, TS: wire.Now()})
	waiter := frame(wire.Request{Op: wire.OpHello, Kind: wire.RoleWaiter, Arg: wire.Version, TS: wire.Now()})
	f.Add(hello)
	f.Add(append(append([]byte{}, hello...), frame(wire.Request{Op: wire.OpNudge})...))
	f.Add(append(append([]byte{}, waiter...), frame(wire.Request{Op: wire.OpWait, Arg: uint64(wire.Now())})...))
	f.Add(append(append([]byte{}, waiter...), frame(wire.Request{Op: wire.OpWait, Arg: 1 << 62})...))
	f.Add(append(append([]byte{}, hello...), frame(wire.Request{Op: wire.OpSample})...))
	f.Add(frame(wire.Request{Op: wire.OpHello, Kind: wire.RoleObserver, Arg: 99}))
	f.Add(frame(wire.Request{Op: wire.OpHello, Kind: wire.RoleQuery, Arg: wire.Version}))
	f.Add(append(frame(wire.Request{Op: wire.OpHello, Kind: wire.RoleObserver, Arg: wire.Version}), frame(wire.Request{Op: wire.OpNudge})...))
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	path := startDevice(f, sim.Options{Library: func() (string, error) { return "/nonexistent/lib.so", nil }})
	src, err := sim.Dial(path)
	if err != nil {
		f.Fatal(err)
	}
	defer src.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		c.Write(b)
		c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		var sink [4096]byte
		c.Read(sink[:])
		c.Close()
		ss, err := src.Sample()
		if err != nil || len(ss) != 1 || ss[0].Lost != "" {
			t.Fatalf("after input %x the server stopped answering: %v %+v", b, err, ss)
		}
	})
}

// rawContext registers a context by hand, as the library does, to write
// what no library writes into its ring.
type rawContext struct {
	c    *net.UnixConn
	reg  wire.Registration
	ring []byte
}

func register(t testing.TB, path string) *rawContext {
	t.Helper()
	nc, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c := nc.(*net.UnixConn)
	if _, err := c.Write(frame(wire.Request{Op: wire.OpHello, Kind: wire.RoleWorkload, Arg: wire.Version, TS: wire.Now()})); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.FrameSize+wire.RegistrationSize)
	oob := make([]byte, unix.CmsgSpace(2*4))
	n, oobn, _, _, err := c.ReadMsgUnix(buf, oob)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf[n:]); err != nil {
		t.Fatal(err)
	}
	h := wire.DecodeReply(buf[:wire.FrameSize])
	if h.Status != 0 || h.PayloadLen != wire.RegistrationSize {
		t.Fatalf("registration reply %+v", h)
	}
	reg, err := wire.DecodeRegistration(buf[wire.FrameSize:])
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("control messages %v %v", msgs, err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 2 {
		t.Fatalf("descriptors %v %v", fds, err)
	}
	ring, err := unix.Mmap(fds[1], 0, wire.RingBytes(reg.RingCapacity), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	unix.Close(fds[0])
	unix.Close(fds[1])
	if err != nil {
		t.Fatal(err)
	}
	rc := &rawContext{c: c, reg: reg, ring: ring}
	t.Cleanup(func() { c.Close(); unix.Munmap(ring) })
	return rc
}

func (rc *rawContext) head() *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&rc.ring[wire.RingHeadOffset]))
}

func (rc *rawContext) put(raw []byte) {
	h := rc.head().Load()
	off := wire.RingRecordStart + int(h%uint64(rc.reg.RingCapacity))*wire.RecordSize
	copy(rc.ring[off:off+wire.RecordSize], raw)
	rc.head().Store(h + 1)
}

func (rc *rawContext) nudge() { rc.c.Write(frame(wire.Request{Op: wire.OpNudge})) }

// A context whose ring holds what no library writes is refused, and says
// why on its channel; the device serves the others on.
func TestCorruptRingIsRefused(t *testing.T) {
	path := startDevice(t, sim.Options{})
	src := observe(t, path)
	rc := register(t, path)
	good := wire.Record{Start: wire.Now(), End: wire.Now() + int64(time.Millisecond), Count: 1}
	var b [wire.RecordSize]byte
	good.Encode(b[:])
	rc.put(b[:])
	bad := good
	bad.Kind = 42
	bad.Encode(b[:])
	rc.put(b[:])
	rc.nudge()
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	r, p, err := wire.ReadReply(rc.c)
	if err != nil || r.Status == 0 || !strings.Contains(string(p), "kind 42") {
		t.Fatalf("refusal %+v %q %v", r, p, err)
	}
	if _, _, err := wire.ReadReply(rc.c); err == nil {
		t.Fatal("the refused context's channel stays open")
	}
	// The good record before it counted; the device serves on.
	time.Sleep(2 * time.Millisecond)
	if s := sample1(t, src); *s.UtilPercent <= 0 {
		t.Errorf("utilisation %v: the good record did not count", *s.UtilPercent)
	}
	// A head that runs ahead of the ring's capacity is refused too.
	rc2 := register(t, path)
	rc2.head().Store(uint64(rc2.reg.RingCapacity) + 5)
	rc2.nudge()
	rc2.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if r, p, err := wire.ReadReply(rc2.c); err != nil || r.Status == 0 || !strings.Contains(string(p), "unread") {
		t.Fatalf("refusal of a runaway head %+v %q %v", r, p, err)
	}
}

// FuzzRingRecords writes arbitrary records into a context's ring: the server
// takes them or refuses the context, never crashes, and serves on.
func FuzzRingRecords(f *testing.F) {
	now := wire.Now()
	for _, r := range []wire.Record{
		{Start: now, End: now + 1000, Count: 1},
		{Start: now, End: now + 1e6, Kind: wire.KindH2D, Bytes: 1 << 20, Count: 1},
		{Start: now, End: now + 5e6, Kind: wire.KindKernel, Count: 200},
		{Start: now + 1e6, End: now, Count: 1},
		{Start: -1, End: 1 << 62, Kind: 7, Count: 0},
	} {
		var b [wire.RecordSize]byte
		r.Encode(b[:])
		f.Add(b[:])
	}
	path := startDevice(f, sim.Options{RingCapacity: 64})
	src, err := sim.Dial(path)
	if err != nil {
		f.Fatal(err)
	}
	defer src.Close()
	f.Fuzz(func(t *testing.T, b []byte) {
		rc := register(t, path)
		for len(b) > 0 {
			var rec [wire.RecordSize]byte
			n := copy(rec[:], b)
			b = b[n:]
			// Keep times near now, so that most records are plausible.
			start := binary.LittleEndian.Uint64(rec[0:]) % uint64(time.Second)
			binary.LittleEndian.PutUint64(rec[0:], uint64(wire.Now())+start)
			rc.put(rec[:])
		}
		rc.nudge()
		ss, err := src.Sample()
		if err != nil || len(ss) != 1 || ss[0].Lost != "" {
			t.Fatalf("the server stopped answering: %v %+v", err, ss)
		}
	})
}
