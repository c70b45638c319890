// Package wire is the simulated device's protocol: fixed-size little-endian
// frames on a Unix stream socket, shared by the server (internal/gpu/sim), the
// Go workload client (internal/gpu/sim/simclient), the observer source and,
// by documentation only, the Python client (python/gpufeed_simdev.py).
// docs/SIMDEV.md is the reference; this file must agree with it.
//
// Every request is one 32-byte frame written with one system call, so that a
// kernel launch costs the client one real system call, as a CUDA launch costs
// one driver call. Only calls that block in CUDA get a reply.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Version is the protocol version a client announces in its hello.
const Version = 1

// FrameSize is the size of every request and of every reply header.
const FrameSize = 32

// MaxPayload caps a reply's JSON payload, so a broken peer cannot make the
// other side allocate without bound. 16 MiB holds minutes of 20 ms points for
// several devices.
const MaxPayload = 16 << 20

// Op is a request's operation code.
type Op uint8

// Operation codes. Workload connections use Launch..SyncDevice; observer
// connections use Info and Sample; both start with Hello.
const (
	OpHello      Op = 1
	OpLaunch     Op = 2
	OpMemcpy     Op = 3
	OpSync       Op = 4
	OpSyncDevice Op = 5
	OpInfo       Op = 16
	OpSample     Op = 17
)

func (o Op) String() string {
	switch o {
	case OpHello:
		return "hello"
	case OpLaunch:
		return "launch"
	case OpMemcpy:
		return "memcpy"
	case OpSync:
		return "sync"
	case OpSyncDevice:
		return "sync-device"
	case OpInfo:
		return "info"
	case OpSample:
		return "sample"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Request flags.
const (
	// FlagReply asks the server to reply once the operation is enqueued (a
	// launch or copy into a stream the client believes full: the reply comes
	// when the stream had room, which is when CUDA's call would return).
	FlagReply uint8 = 1 << 0
	// FlagPinned marks a copy from or to page-locked host memory.
	FlagPinned uint8 = 1 << 1
)

// Copy directions (Request.Kind of a memcpy).
const (
	CopyH2D uint8 = 0
	CopyD2H uint8 = 1
	CopyD2D uint8 = 2
)

// CopyKindName names a copy direction as the Python API spells it.
func CopyKindName(k uint8) string {
	switch k {
	case CopyH2D:
		return "h2d"
	case CopyD2H:
		return "d2h"
	case CopyD2D:
		return "d2d"
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Hello roles (Request.Kind of a hello).
const (
	RoleWorkload uint8 = 0
	RoleObserver uint8 = 1
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
//	2      1    kind     copy direction, or hello role
//	3      1    reserved (0)
//	4      4    stream   stream number; hello: device index
//	8      8    ts       CLOCK_MONOTONIC nanoseconds when the client made the call
//	16     8    arg      kernel duration ns; copy bytes; hello: protocol version
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

// Reply is one server frame header; PayloadLen bytes of JSON follow it.
//
//	offset size field
//	0      1    op       the request's op
//	1      1    status   StatusOK or an error (payload: the message)
//	2      2    reserved (0)
//	4      4    payload  length of the JSON payload that follows
//	8      8    time     server CLOCK_MONOTONIC ns: the operation's end, the sync target
//	16     8    value    op-specific (unused so far: 0)
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

// Hello is the JSON payload of the reply to a hello: what a client needs to
// mirror the stream arithmetic (to know when a stream is full) locally.
type Hello struct {
	Protocol int `json:"protocol"`
	Device   int `json:"device"`
	Devices  int `json:"devices"`
	// PID is the client's process as the server saw it (SO_PEERCRED).
	PID int `json:"pid"`
	// MaxPending is the most operations a stream holds before a submit blocks.
	MaxPending int `json:"max_pending"`
	// Bandwidth is bytes per second for pinned copies per direction ("h2d", "d2h", "d2d").
	Bandwidth map[string]float64 `json:"bandwidth_bytes_per_sec"`
	// PageableFactor multiplies the pinned bandwidth for pageable copies.
	PageableFactor float64 `json:"pageable_factor"`
	// ClockOffsetNS is added to this connection's timestamps: non-zero only
	// when the client's CLOCK_MONOTONIC differs from the server's (another
	// time namespace).
	ClockOffsetNS int64 `json:"clock_offset_ns"`
}
