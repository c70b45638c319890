// Package wire is the simulated device's protocol, shared by the server
// (internal/sim), the observer source and the simulated driver library
// (internal/sim/simcuda, in C; the Python client reads only the query
// reply): fixed-size little-endian frames on a Unix stream socket for what
// happens once (a context's registration, an observer's samples, a blocking
// wait), and shared memory for what happens at every launch (Layout below).
// docs/SIMDEV.md is the reference; this file and the C library must agree
// with it.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Version is the protocol version a client announces in its hello. Version
// 2 moved launches from socket messages to shared memory.
const Version = 2

// FrameSize is the size of every request and of every reply header.
const FrameSize = 32

// MaxPayload caps a reply's payload, so a broken peer cannot make the
// other side allocate without bound. 16 MiB holds minutes of 20 ms points for
// several devices.
const MaxPayload = 16 << 20

// Op is a request's operation code.
type Op uint8

// Operation codes. Every connection starts with Hello; workload and waiter
// connections then send Wait and Nudge, observers Info and Sample.
const (
	OpHello  Op = 1
	OpWait   Op = 6
	OpNudge  Op = 7
	OpInfo   Op = 16
	OpSample Op = 17
)

func (o Op) String() string {
	switch o {
	case OpHello:
		return "hello"
	case OpWait:
		return "wait"
	case OpNudge:
		return "nudge"
	case OpInfo:
		return "info"
	case OpSample:
		return "sample"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Hello roles (Request.Kind of a hello).
const (
	// RoleWorkload registers a context: the reply carries the registration
	// (Registration) and two descriptors (SCM_RIGHTS): the device's shared
	// memory and the context's ring. The connection stays open for the
	// context's life: it is the context's device channel.
	RoleWorkload uint8 = 0
	// RoleObserver reads samples (a gpu.Source).
	RoleObserver uint8 = 1
	// RoleWaiter is a thread's channel for blocking waits (Wait).
	RoleWaiter uint8 = 2
	// RoleQuery asks what the server is (Query), then the server closes.
	RoleQuery uint8 = 3
)

// Reply status codes.
const (
	StatusOK         uint8 = 0
	StatusBadRequest uint8 = 1
	StatusNoDevice   uint8 = 2
	StatusWrongRole  uint8 = 3
	StatusVersion    uint8 = 4
)

// Request is one client frame.
//
//	offset size field
//	0      1    op
//	1      1    flags
//	2      1    kind     hello: role
//	3      1    reserved (0)
//	4      4    stream   hello: device index
//	8      8    ts       CLOCK_MONOTONIC nanoseconds when the client made the call
//	16     8    arg      hello: protocol version; wait: the device time to wake at
//	24     8    seq      request number, echoed in the reply
type Request struct {
	Op     Op
	Flags  uint8
	Kind   uint8
	Stream uint32
	TS     int64
	Arg    uint64
	Seq    uint64
}

// Encode writes r into b, which must hold FrameSize bytes.
func (r Request) Encode(b []byte) {
	_ = b[FrameSize-1]
	b[0] = byte(r.Op)
	b[1] = r.Flags
	b[2] = r.Kind
	b[3] = 0
	binary.LittleEndian.PutUint32(b[4:], r.Stream)
	binary.LittleEndian.PutUint64(b[8:], uint64(r.TS))
	binary.LittleEndian.PutUint64(b[16:], r.Arg)
	binary.LittleEndian.PutUint64(b[24:], r.Seq)
}

// DecodeRequest reads a request from b, which must hold FrameSize bytes.
func DecodeRequest(b []byte) Request {
	_ = b[FrameSize-1]
	return Request{
		Op:     Op(b[0]),
		Flags:  b[1],
		Kind:   b[2],
		Stream: binary.LittleEndian.Uint32(b[4:]),
		TS:     int64(binary.LittleEndian.Uint64(b[8:])),
		Arg:    binary.LittleEndian.Uint64(b[16:]),
		Seq:    binary.LittleEndian.Uint64(b[24:]),
	}
}

// Reply is one server frame header; PayloadLen bytes follow it (JSON, or a
// Registration for a workload's hello).
//
//	offset size field
//	0      1    op       the request's op
//	1      1    status   StatusOK or an error (payload: the message)
//	2      2    reserved (0)
//	4      4    payload  length of the payload that follows
//	8      8    time     server CLOCK_MONOTONIC ns: a wait's target, a sample's instant
//	16     8    value    hello: the number of devices
//	24     8    seq      the request's seq
type Reply struct {
	Op         Op
	Status     uint8
	PayloadLen uint32
	Time       int64
	Value      uint64
	Seq        uint64
}

// Encode writes r into b, which must hold FrameSize bytes.
func (r Reply) Encode(b []byte) {
	_ = b[FrameSize-1]
	b[0] = byte(r.Op)
	b[1] = r.Status
	b[2], b[3] = 0, 0
	binary.LittleEndian.PutUint32(b[4:], r.PayloadLen)
	binary.LittleEndian.PutUint64(b[8:], uint64(r.Time))
	binary.LittleEndian.PutUint64(b[16:], r.Value)
	binary.LittleEndian.PutUint64(b[24:], r.Seq)
}

// DecodeReply reads a reply header from b, which must hold FrameSize bytes.
func DecodeReply(b []byte) Reply {
	_ = b[FrameSize-1]
	return Reply{
		Op:         Op(b[0]),
		Status:     b[1],
		PayloadLen: binary.LittleEndian.Uint32(b[4:]),
		Time:       int64(binary.LittleEndian.Uint64(b[8:])),
		Value:      binary.LittleEndian.Uint64(b[16:]),
		Seq:        binary.LittleEndian.Uint64(b[24:]),
	}
}

// AppendReply appends a reply frame and its payload to dst.
func AppendReply(dst []byte, r Reply, payload []byte) []byte {
	r.PayloadLen = uint32(len(payload))
	var h [FrameSize]byte
	r.Encode(h[:])
	dst = append(dst, h[:]...)
	return append(dst, payload...)
}

// ReadReply reads one reply header and its payload from rd.
func ReadReply(rd io.Reader) (Reply, []byte, error) {
	var h [FrameSize]byte
	if _, err := io.ReadFull(rd, h[:]); err != nil {
		return Reply{}, nil, err
	}
	r := DecodeReply(h[:])
	if r.PayloadLen > MaxPayload {
		return r, nil, fmt.Errorf("simulated device reply to %s: payload of %d bytes exceeds the %d-byte limit", r.Op, r.PayloadLen, MaxPayload)
	}
	if r.PayloadLen == 0 {
		return r, nil, nil
	}
	p := make([]byte, r.PayloadLen)
	if _, err := io.ReadFull(rd, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return r, nil, err
	}
	return r, p, nil
}

// Query is the JSON payload of the reply to a query hello.
type Query struct {
	Protocol int `json:"protocol"`
	Devices  int `json:"devices"`
	// Library is the path of the simulated driver library built from the
	// server's own source (a client in Python loads it), or LibraryError
	// says why there is none.
	Library      string `json:"library,omitempty"`
	LibraryError string `json:"library_error,omitempty"`
}

// RegistrationSize is the size of a Registration on the wire.
const RegistrationSize = 160

// Registration magic numbers and the shared memory layout version.
const (
	RegistrationMagic = 0x52534647 // "GFSR"
	DeviceMagic       = 0x44534647 // "GFSD"
	RingMagic         = 0x47534647 // "GFSG"
	ShmVersion        = 1
)

// Registration is the payload of the reply to a workload's hello: what the
// driver library needs to run the stream arithmetic itself.
//
//	offset size field
//	0      4    magic "GFSR"
//	4      4    protocol
//	8      4    device index
//	12     4    devices
//	16     8    pid (the client's process as the server sees it: SO_PEERCRED)
//	24     8    clock offset ns, added to the client's CLOCK_MONOTONIC (another time namespace)
//	32     8    registration id
//	40     4    max pending operations per stream
//	44     4    ring capacity (records)
//	48     8    pinned h2d bandwidth, bytes/s (float64)
//	56     8    pinned d2h bandwidth
//	64     8    d2d bandwidth
//	72     8    pageable factor (float64)
//	80     8    launch cost ns
//	88     8    device memory bytes
//	96     64   device name, NUL-padded
type Registration struct {
	Device, Devices int
	PID             int
	ClockOffsetNS   int64
	ID              uint64
	MaxPending      int
	RingCapacity    int
	Bandwidth       [3]float64
	PageableFactor  float64
	LaunchCostNS    uint64
	MemTotalBytes   uint64
	Name            string
}

// Encode returns the registration's wire form.
func (r Registration) Encode() []byte {
	b := make([]byte, RegistrationSize)
	le := binary.LittleEndian
	le.PutUint32(b[0:], RegistrationMagic)
	le.PutUint32(b[4:], Version)
	le.PutUint32(b[8:], uint32(r.Device))
	le.PutUint32(b[12:], uint32(r.Devices))
	le.PutUint64(b[16:], uint64(int64(r.PID)))
	le.PutUint64(b[24:], uint64(r.ClockOffsetNS))
	le.PutUint64(b[32:], r.ID)
	le.PutUint32(b[40:], uint32(r.MaxPending))
	le.PutUint32(b[44:], uint32(r.RingCapacity))
	for i, bw := range r.Bandwidth {
		le.PutUint64(b[48+8*i:], math.Float64bits(bw))
	}
	le.PutUint64(b[72:], math.Float64bits(r.PageableFactor))
	le.PutUint64(b[80:], r.LaunchCostNS)
	le.PutUint64(b[88:], r.MemTotalBytes)
	name := r.Name
	if len(name) > 63 {
		name = name[:63]
	}
	copy(b[96:159], name)
	return b
}

// DecodeRegistration reads a registration (what the C library does).
func DecodeRegistration(b []byte) (Registration, error) {
	le := binary.LittleEndian
	if len(b) != RegistrationSize || le.Uint32(b) != RegistrationMagic {
		return Registration{}, errors.New("not a registration")
	}
	if v := le.Uint32(b[4:]); v != Version {
		return Registration{}, fmt.Errorf("registration of protocol %d, want %d", v, Version)
	}
	r := Registration{
		Device:         int(le.Uint32(b[8:])),
		Devices:        int(le.Uint32(b[12:])),
		PID:            int(int64(le.Uint64(b[16:]))),
		ClockOffsetNS:  int64(le.Uint64(b[24:])),
		ID:             le.Uint64(b[32:]),
		MaxPending:     int(le.Uint32(b[40:])),
		RingCapacity:   int(le.Uint32(b[44:])),
		PageableFactor: math.Float64frombits(le.Uint64(b[72:])),
		LaunchCostNS:   le.Uint64(b[80:]),
		MemTotalBytes:  le.Uint64(b[88:]),
	}
	for i := range r.Bandwidth {
		r.Bandwidth[i] = math.Float64frombits(le.Uint64(b[48+8*i:]))
	}
	name := b[96:160]
	if i := indexByte(name, 0); i >= 0 {
		name = name[:i]
	}
	r.Name = string(name)
	return r, nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// Shared memory layout. The server creates both regions (memfd, sealed
// against resizing) and hands them to each registering context.
//
// Device region (DeviceShmSize bytes, one per device, shared by every
// context on it):
//
//	offset size field
//	0      4    magic "GFSD"
//	4      4    layout version
//	64     8    when the h2d copy engine is next free (device ns), advanced with compare-and-swap
//	128    8    when the d2h copy engine is next free
//
// Ring region (one per context): a single-producer ring of records (the
// context's lock makes its threads one producer), read by the server.
//
//	offset size field
//	0      4    magic "GFSG"
//	4      4    layout version
//	8      4    capacity (records)
//	12     4    record size (RecordSize)
//	64     8    head: records written (the library stores it with release order)
//	128    8    tail: records read (the server stores it)
//	256    ...  records, record i at 256 + (i mod capacity) * RecordSize
const (
	DeviceShmSize   = 4096
	EngineOffset    = 64 // + 64 * direction
	RingHeadOffset  = 64
	RingTailOffset  = 128
	RingRecordStart = 256
	RecordSize      = 32
)

// RingBytes is the size of a ring region of capacity records.
func RingBytes(capacity int) int {
	n := RingRecordStart + capacity*RecordSize
	return (n + 4095) &^ 4095
}

// Record kinds.
const (
	KindKernel uint8 = 0
	KindH2D    uint8 = 1
	KindD2H    uint8 = 2
	KindD2D    uint8 = 3
)

// RecordPinned marks a copy from or to page-locked host memory.
const RecordPinned uint8 = 1

// Record is one operation, or a run of back-to-back kernels of a graph, as
// the library placed it on a stream.
//
//	offset size field
//	0      8    start (device CLOCK_MONOTONIC ns)
//	8      8    end
//	16     8    bytes (copies)
//	24     4    stream (the context's stream number; 0 the default stream)
//	28     1    kind (KindKernel, KindH2D, KindD2H, KindD2D)
//	29     1    flags (RecordPinned)
//	30     2    count: operations in the record (a graph's run of kernels), at least 1
type Record struct {
	Start, End int64
	Bytes      uint64
	Stream     uint32
	Kind       uint8
	Flags      uint8
	Count      uint16
}

// DecodeRecord reads a record from b (RecordSize bytes).
func DecodeRecord(b []byte) Record {
	_ = b[RecordSize-1]
	le := binary.LittleEndian
	return Record{
		Start:  int64(le.Uint64(b[0:])),
		End:    int64(le.Uint64(b[8:])),
		Bytes:  le.Uint64(b[16:]),
		Stream: le.Uint32(b[24:]),
		Kind:   b[28],
		Flags:  b[29],
		Count:  le.Uint16(b[30:]),
	}
}

// Encode writes the record into b (RecordSize bytes), as the library does.
func (r Record) Encode(b []byte) {
	_ = b[RecordSize-1]
	le := binary.LittleEndian
	le.PutUint64(b[0:], uint64(r.Start))
	le.PutUint64(b[8:], uint64(r.End))
	le.PutUint64(b[16:], r.Bytes)
	le.PutUint32(b[24:], r.Stream)
	b[28] = r.Kind
	b[29] = r.Flags
	le.PutUint16(b[30:], r.Count)
}
