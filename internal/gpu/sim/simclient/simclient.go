// Package simclient is the Go client of the simulated device: what Go
// workloads (the demo scenarios) call where a CUDA program would call the
// driver. Each call is one message on the device's Unix socket; only calls
// that block in CUDA wait for a reply. docs/SIMDEV.md has the model.
//
// A Client is safe for concurrent use, but a call that blocks (a submit into
// a full stream) holds up the other goroutines' calls on the same Client, so
// give each launching goroutine its own Client. Streams belong to the process,
// as CUDA streams belong to its context: Clients of one process share them.
package simclient

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu/sim/wire"
)

// EnvVar names the environment variable that holds the device's socket path.
const EnvVar = "GPUFEED_SIMDEV"

// CopyKind is a copy's direction.
type CopyKind uint8

// Copy directions.
const (
	H2D CopyKind = CopyKind(wire.CopyH2D)
	D2H CopyKind = CopyKind(wire.CopyD2H)
	D2D CopyKind = CopyKind(wire.CopyD2D)
)

// Client is one connection to a simulated device.
type Client struct {
	path  string
	c     net.Conn
	hello wire.Hello

	// mu serialises sends and guards what follows, so that the local mirror
	// of each stream matches the order the server sees.
	mu      sync.Mutex
	seq     uint64
	waiters map[uint64]chan wire.Reply
	mirror  map[uint32]*mirrorStream
	err     error // set once the connection failed; every later call returns it

	readDone chan struct{}
}

// mirrorStream is the client's estimate of a stream's outstanding operations,
// computed with the server's arithmetic, to know when a submit must block.
type mirrorStream struct {
	ends []int64
	last int64
}

// Dial connects to device 0 of the simulated device at path.
func Dial(path string) (*Client, error) { return DialDevice(path, 0) }

// FromEnv connects to device 0 of the simulated device named by GPUFEED_SIMDEV.
func FromEnv() (*Client, error) {
	p := os.Getenv(EnvVar)
	if p == "" {
		return nil, errors.New(EnvVar + " is not set: start a simulated device with `gpufeed simdev --socket PATH` and export " + EnvVar + "=PATH")
	}
	return Dial(p)
}

// DialDevice connects to device index of the simulated device at path.
func DialDevice(path string, index int) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("simulated device at %s: %w", path, err)
	}
	cl := &Client{path: path, c: c, waiters: map[uint64]chan wire.Reply{}, mirror: map[uint32]*mirrorStream{}, readDone: make(chan struct{})}
	var b [wire.FrameSize]byte
	wire.Request{Op: wire.OpHello, Kind: wire.RoleWorkload, Stream: uint32(index), TS: wire.Now(), Arg: wire.Version}.Encode(b[:])
	if _, err := c.Write(b[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("simulated device at %s: hello: %w", path, err)
	}
	rd := bufio.NewReader(c)
	r, p, err := wire.ReadReply(rd)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("simulated device at %s: hello: %w", path, err)
	}
	if r.Status != wire.StatusOK {
		c.Close()
		return nil, fmt.Errorf("simulated device at %s: %s", path, p)
	}
	if err := json.Unmarshal(p, &cl.hello); err != nil {
		c.Close()
		return nil, fmt.Errorf("simulated device at %s: hello: %w", path, err)
	}
	go cl.readLoop(rd)
	return cl, nil
}

// PID is this process as the device identifies it (SO_PEERCRED).
func (cl *Client) PID() int { return cl.hello.PID }

// Hello returns what the server announced at connection.
func (cl *Client) Hello() wire.Hello { return cl.hello }

func (cl *Client) readLoop(rd *bufio.Reader) {
	defer close(cl.readDone)
	for {
		r, p, err := wire.ReadReply(rd)
		cl.mu.Lock()
		if err != nil {
			if cl.err == nil {
				cl.err = fmt.Errorf("simulated device at %s: connection lost: %w", cl.path, err)
			}
			for seq, ch := range cl.waiters {
				close(ch)
				delete(cl.waiters, seq)
			}
			cl.mu.Unlock()
			return
		}
		if r.Status != wire.StatusOK && cl.err == nil {
			cl.err = fmt.Errorf("simulated device at %s: %s refused: %s", cl.path, r.Op, p)
		}
		if ch, ok := cl.waiters[r.Seq]; ok {
			delete(cl.waiters, r.Seq)
			ch <- r
		}
		cl.mu.Unlock()
	}
}

// refusalGrace bounds the wait for the reader after a failed write: the
// refusal, when there is one, is already in the socket's buffer.
const refusalGrace = time.Second

// send writes one request (one system call); with wait it returns a channel
// that receives the reply. It must be called with cl.mu held.
func (cl *Client) send(req wire.Request, wait bool) (chan wire.Reply, error) {
	if cl.err != nil {
		return nil, cl.err
	}
	cl.seq++
	req.Seq = cl.seq
	var ch chan wire.Reply
	if wait {
		ch = make(chan wire.Reply, 1)
		cl.waiters[req.Seq] = ch
	}
	var b [wire.FrameSize]byte
	req.Encode(b[:])
	if _, err := cl.c.Write(b[:]); err != nil {
		delete(cl.waiters, req.Seq)
		// The device refuses a bad request by replying and closing the
		// connection, so a later write can fail (broken pipe) before the
		// reader has taken the refusal: give it a moment to record why.
		cl.mu.Unlock()
		select {
		case <-cl.readDone:
		case <-time.After(refusalGrace):
		}
		cl.mu.Lock()
		if cl.err == nil {
			cl.err = fmt.Errorf("simulated device at %s: %s: %w", cl.path, req.Op, err)
		}
		return nil, cl.err
	}
	return ch, nil
}

// await waits for a reply; a closed channel means the connection failed.
func (cl *Client) await(ch chan wire.Reply) (wire.Reply, error) {
	r, ok := <-ch
	if !ok || r.Status != wire.StatusOK {
		cl.mu.Lock()
		defer cl.mu.Unlock()
		if cl.err == nil {
			cl.err = fmt.Errorf("simulated device at %s: request failed", cl.path)
		}
		return r, cl.err
	}
	return r, nil
}

// submit sends a kernel or copy of duration dur (the mirror's estimate) and
// blocks when the stream is full or the copy is pageable.
func (cl *Client) submit(req wire.Request, dur int64, blocking bool) error {
	cl.mu.Lock()
	now := wire.Now()
	req.TS = now
	m := cl.mirror[req.Stream]
	if m == nil {
		m = &mirrorStream{}
		cl.mirror[req.Stream] = m
	}
	i := 0
	for i < len(m.ends) && m.ends[i] <= now {
		i++
	}
	m.ends = append(m.ends[:0], m.ends[i:]...)
	full := len(m.ends) >= cl.hello.MaxPending
	if full {
		req.Flags |= wire.FlagReply
	}
	end := max(now, m.last) + dur
	m.last = end
	m.ends = append(m.ends, end)
	ch, err := cl.send(req, full || blocking)
	cl.mu.Unlock()
	if err != nil || ch == nil {
		return err
	}
	r, err := cl.await(ch)
	if err != nil {
		return err
	}
	// The server's end time is the truth: correct the estimate.
	cl.mu.Lock()
	if m.last == end {
		m.last = r.Time
		if n := len(m.ends); n > 0 && m.ends[n-1] == end {
			m.ends[n-1] = r.Time
		}
	}
	cl.mu.Unlock()
	return nil
}

// Launch submits a kernel of duration d to stream. It returns at once unless
// the stream holds the maximum of pending operations (1024), in which case
// it blocks until one of them ends, as cudaLaunchKernel does.
func (cl *Client) Launch(d time.Duration, stream uint32) error {
	if d < 0 {
		return fmt.Errorf("kernel duration %v: must not be negative", d)
	}
	return cl.submit(wire.Request{Op: wire.OpLaunch, Stream: stream, Arg: uint64(d)}, int64(d), false)
}

// Memcpy submits a copy of nbytes. A pinned copy is asynchronous, as
// cudaMemcpyAsync from page-locked memory; a pageable one (h2d or d2h) runs at
// a lower bandwidth and blocks until it is done, as CUDA's do.
func (cl *Client) Memcpy(nbytes uint64, kind CopyKind, pinned bool, stream uint32) error {
	if kind > D2D {
		return fmt.Errorf("copy kind %d: want H2D, D2H or D2D", kind)
	}
	bw := cl.hello.Bandwidth[wire.CopyKindName(uint8(kind))]
	blocking := !pinned && kind != D2D
	if blocking {
		bw *= cl.hello.PageableFactor
	}
	var dur int64
	if bw > 0 {
		dur = int64(float64(nbytes) / bw * 1e9)
	}
	var flags uint8
	if pinned {
		flags = wire.FlagPinned
	}
	return cl.submit(wire.Request{Op: wire.OpMemcpy, Flags: flags, Kind: uint8(kind), Stream: stream, Arg: nbytes}, dur, blocking)
}

// Synchronize blocks until every operation submitted to stream so far has
// ended (cudaStreamSynchronize).
func (cl *Client) Synchronize(stream uint32) error {
	return cl.sync(wire.Request{Op: wire.OpSync, Stream: stream})
}

// SynchronizeDevice blocks until every operation this process submitted to
// the device so far has ended (cudaDeviceSynchronize).
func (cl *Client) SynchronizeDevice() error {
	return cl.sync(wire.Request{Op: wire.OpSyncDevice})
}

func (cl *Client) sync(req wire.Request) error {
	cl.mu.Lock()
	req.TS = wire.Now()
	ch, err := cl.send(req, true)
	cl.mu.Unlock()
	if err != nil {
		return err
	}
	r, err := cl.await(ch)
	if err != nil {
		return err
	}
	cl.mu.Lock()
	// Everything included has ended by now: the next operation starts when
	// it is submitted.
	for sid, m := range cl.mirror {
		if req.Op == wire.OpSyncDevice || sid == req.Stream {
			m.ends = m.ends[:0]
			m.last = r.Time
		}
	}
	cl.mu.Unlock()
	return nil
}

// Close disconnects. Operations already submitted still run on the device.
func (cl *Client) Close() error {
	err := cl.c.Close()
	<-cl.readDone
	return err
}
