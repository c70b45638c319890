package profile

import "sort"

// Category is what the code a CPU sample landed in is, by the library and
// symbol it belongs to.
type Category string

// The categories of a thread's CPU time. The driver's three are told apart
// by the exported entry point the sample falls in (cuLaunchKernel, ...) or
// the driver-internal function it calls.
const (
	DriverLaunch Category = "driver-launch" // cuLaunchKernel(Ex), cuGraphLaunch, their _ptsz variants
	DriverSync   Category = "driver-sync"   // cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize and their waits
	DriverOther  Category = "driver-other"  // the driver's other code
	Interpreter  Category = "interpreter"   // the Python interpreter (eval loop, objects)
	Framework    Category = "framework"     // libtorch_cpu, libc10, aten: CPU operators and the dispatcher
	Decode       Category = "decode"        // libz, libjpeg, libpng, PIL's _imaging, libavcodec ...
	Memcpy       Category = "memcpy"        // memcpy, memmove
	Locks        Category = "locks"         // pthread_mutex_*, futex waits in user space
	Kernel       Category = "kernel"        // samples taken in kernel mode
	Other        Category = "other"         // anything else (named in Top)
)

// Categories lists them in the order reports show them.
var Categories = []Category{DriverLaunch, DriverSync, DriverOther, Interpreter, Framework, Decode, Memcpy, Locks, Kernel, Other}

// The states of a CPU profile.
const (
	StateOn          = "on"
	StateOff         = "off"
	StateUnavailable = "unavailable"
)

// CPUProfile is what CPU sampling saw of a job's threads in one window.
type CPUProfile struct {
	// State is "on" (sampled), "off" (not asked) or "unavailable"; Missing
	// then says what would show it (a capability, a setting), and CannotTell
	// what the report cannot tell apart without it.
	State      string `json:"state"`
	Missing    string `json:"missing,omitempty"`
	CannotTell string `json:"cannot_tell,omitempty"`
	// FrequencyHz is the sampling rate per CPU; CPUs how many were sampled;
	// WindowNS how long.
	FrequencyHz int   `json:"frequency_hz,omitempty"`
	CPUs        int   `json:"cpus,omitempty"`
	WindowNS    int64 `json:"window_ns,omitempty"`
	// Lost counts samples the kernel dropped (a ring buffer full);
	// Unresolved user addresses no mapping of their process held (a thread
	// gone before its maps were read): counted, never guessed; written,
	// zero included.
	Lost       uint64 `json:"lost"`
	Unresolved int    `json:"unresolved"`
	// Threads are the job's threads that were sampled, most samples first
	// (empty, not absent, in a profile taken while none of them ran).
	Threads []ThreadCPU `json:"threads"`
}

// ThreadCPU is one thread's samples by category, and its hottest symbols.
type ThreadCPU struct {
	PID        int              `json:"pid"`
	TID        int              `json:"tid"`
	Comm       string           `json:"comm,omitempty"`
	Samples    int              `json:"samples"`
	Categories map[Category]int `json:"categories"`
	Top        []SymbolSamples  `json:"top,omitempty"`
}

// SymbolSamples is one symbol's samples in a thread ("cuStreamSynchronize"
// in "libcuda.so.1"); Symbol is empty where the file holds no symbol for it.
type SymbolSamples struct {
	Symbol   string   `json:"symbol,omitempty"`
	File     string   `json:"file"`
	Category Category `json:"category"`
	Samples  int      `json:"samples"`
}

// Share is the fraction of the thread's samples in c (0 when none).
func (t ThreadCPU) Share(c Category) float64 {
	if t.Samples == 0 {
		return 0
	}
	return float64(t.Categories[c]) / float64(t.Samples)
}

// Thread returns the profile of thread tid, or false.
func (p *CPUProfile) Thread(tid int) (ThreadCPU, bool) {
	if p == nil {
		return ThreadCPU{}, false
	}
	for _, t := range p.Threads {
		if t.TID == tid {
			return t, true
		}
	}
	return ThreadCPU{}, false
}

// TopIn returns the symbol with the most samples of category c in t.
func (t ThreadCPU) TopIn(c Category) (SymbolSamples, bool) {
	var best SymbolSamples
	for _, s := range t.Top {
		if s.Category == c && s.Samples > best.Samples {
			best = s
		}
	}
	return best, best.Samples > 0
}

// SortThreads orders the threads by samples, most first, then by tid.
func (p *CPUProfile) SortThreads() {
	sort.Slice(p.Threads, func(i, j int) bool {
		a, b := p.Threads[i], p.Threads[j]
		if a.Samples != b.Samples {
			return a.Samples > b.Samples
		}
		return a.TID < b.TID
	})
}
