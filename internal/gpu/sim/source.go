package sim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/sim/wire"
)

// Source observes a simulated device server: it is the gpu.Source diagnose
// uses for --device sim:PATH or a target whose environment has GPUFEED_SIMDEV.
type Source struct {
	path    string
	mu      sync.Mutex
	c       net.Conn
	rd      *bufio.Reader
	seq     uint64
	devices []gpu.DeviceInfo
	lost    string // set once the server stopped answering
}

var _ gpu.Source = (*Source)(nil)

// dialTimeout bounds connecting and each exchange with the server: it answers
// from memory, so a second is an eternity.
const dialTimeout = 5 * time.Second

// Dial connects to the simulated device at path as an observer. Its first
// Sample covers the time since Dial.
func Dial(path string) (*Source, error) {
	c, err := net.DialTimeout("unix", path, dialTimeout)
	if err != nil {
		return nil, fmt.Errorf("simulated device at %s: %w", path, err)
	}
	s := &Source{path: path, c: c, rd: bufio.NewReader(c)}
	if _, err := s.call(wire.Request{Op: wire.OpHello, Kind: wire.RoleObserver, TS: wire.Now(), Arg: wire.Version}); err != nil {
		c.Close()
		return nil, err
	}
	p, err := s.call(wire.Request{Op: wire.OpInfo, TS: wire.Now()})
	if err != nil {
		c.Close()
		return nil, err
	}
	if err := json.Unmarshal(p, &s.devices); err != nil {
		c.Close()
		return nil, fmt.Errorf("simulated device at %s: device list: %w", path, err)
	}
	return s, nil
}

// call sends one request and reads its reply's payload.
func (s *Source) call(req wire.Request) ([]byte, error) {
	s.seq++
	req.Seq = s.seq
	var b [wire.FrameSize]byte
	req.Encode(b[:])
	if err := s.c.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
		return nil, fmt.Errorf("simulated device at %s: %w", s.path, err)
	}
	if _, err := s.c.Write(b[:]); err != nil {
		return nil, fmt.Errorf("simulated device at %s: %s: %w", s.path, req.Op, err)
	}
	r, p, err := wire.ReadReply(s.rd)
	if err != nil {
		return nil, fmt.Errorf("simulated device at %s: %s: %w", s.path, req.Op, err)
	}
	if r.Status != wire.StatusOK {
		return nil, fmt.Errorf("simulated device at %s: %s refused: %s", s.path, req.Op, p)
	}
	if r.Seq != req.Seq || r.Op != req.Op {
		return nil, fmt.Errorf("simulated device at %s: reply %s #%d to request %s #%d", s.path, r.Op, r.Seq, req.Op, req.Seq)
	}
	return p, nil
}

// Name says what this source is.
func (s *Source) Name() string { return "simulated device at " + s.path }

// Devices returns the devices' static facts, read at Dial.
func (s *Source) Devices() []gpu.DeviceInfo { return s.devices }

// Sample reads every device over the window since the previous call. When the
// server has gone away every device is reported Lost and the run goes on.
func (s *Source) Sample() ([]gpu.Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost == "" {
		p, err := s.call(wire.Request{Op: wire.OpSample, TS: wire.Now()})
		if err == nil {
			var out []gpu.Sample
			if err := json.Unmarshal(p, &out); err != nil {
				return nil, fmt.Errorf("simulated device at %s: sample: %w", s.path, err)
			}
			return out, nil
		}
		s.lost = err.Error()
		s.c.Close()
	}
	now := time.Now()
	out := make([]gpu.Sample, len(s.devices))
	for i, d := range s.devices {
		out[i] = gpu.Sample{Index: d.Index, At: now, Lost: "stopped answering: " + s.lost}
	}
	return out, nil
}

// Close disconnects from the server.
func (s *Source) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lost != "" {
		return nil // already closed, by Close or when the server went away
	}
	s.lost = "closed"
	return s.c.Close()
}

// Path is the socket path of the simulated device this source observes.
func (s *Source) Path() string { return s.path }
