package agent

import (
	"sync"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// sharedSource lets every job's sampler and the discovery read one GPU
// source. A device's utilisation covers the time since the previous
// reading, so readings taken by several samplers one after the other
// would each cover a sliver of the interval: one reading is taken per
// interval at most, and every reader within it gets that reading.
type sharedSource struct {
	mu    sync.Mutex
	src   gpu.Source
	fresh time.Duration
	last  time.Time
	cache []gpu.Sample
	err   error
	// reads counts the readings of the underlying source.
	reads int
}

func newSharedSource(src gpu.Source, interval time.Duration) *sharedSource {
	return &sharedSource{src: src, fresh: interval / 2}
}

func (s *sharedSource) Name() string              { return s.src.Name() }
func (s *sharedSource) Devices() []gpu.DeviceInfo { return s.src.Devices() }

// Sample returns the source's reading, read again when the last one is
// older than half an interval. Samples are shared: readers must not
// modify them (no reader of a timeline does).
func (s *sharedSource) Sample() ([]gpu.Sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reads > 0 && time.Since(s.last) < s.fresh {
		return s.cache, s.err
	}
	s.cache, s.err = s.src.Sample()
	s.last = time.Now()
	s.reads++
	return s.cache, s.err
}

// Close does nothing: the agent closes the underlying source once.
func (s *sharedSource) Close() error { return nil }

// Path is the simulated device's socket, when the source is one (device
// channels recognise the sockets connected to it).
func (s *sharedSource) Path() string {
	if p, ok := s.src.(interface{ Path() string }); ok {
		return p.Path()
	}
	return ""
}

// jobSource is one job's view of the shared source: the devices the job
// uses (all of them while none is known). A node's eight GPUs each
// report their fine-grained utilisation every reading; a job keeps only
// its own GPU's in its windows and its ring.
type jobSource struct {
	*sharedSource
	j *job
}

func (s jobSource) keep(index int) bool {
	s.j.mu.Lock()
	defer s.j.mu.Unlock()
	if len(s.j.devices) == 0 || s.j.byNode {
		return true
	}
	return containsInt(s.j.devices, index)
}

func (s jobSource) Devices() []gpu.DeviceInfo {
	var out []gpu.DeviceInfo
	for _, d := range s.sharedSource.Devices() {
		if s.keep(d.Index) {
			out = append(out, d)
		}
	}
	return out
}

func (s jobSource) Sample() ([]gpu.Sample, error) {
	all, err := s.sharedSource.Sample()
	out := make([]gpu.Sample, 0, 1)
	for _, x := range all {
		if s.keep(x.Index) {
			out = append(out, x)
		}
	}
	return out, err
}
