package profile

import (
	"fmt"
	"sort"
)

// Driver call classes: what an exported CUDA driver entry point does.
const (
	CallLaunch      = "launch"       // cuLaunchKernel(Ex), cuLaunchCooperativeKernel, their _ptsz variants
	CallGraphLaunch = "graph-launch" // cuGraphLaunch(_ptsz)
	CallCopy        = "copy"         // cuMemcpy*
	CallAlloc       = "alloc"        // cuMemAlloc*, cuMemHostAlloc, cuMemCreate
	CallFree        = "free"         // cuMemFree*, cuMemFreeHost, cuMemRelease
	CallSync        = "sync"         // cuStreamSynchronize, cuCtxSynchronize, cuEventSynchronize (time inside measured)
)

// DriverCalls is what uprobes on the CUDA driver library counted of a
// job's threads in one window: calls per entry point, bytes where the call
// names them, and the time inside the synchronisations.
type DriverCalls struct {
	// State is "on", "off" or "unavailable"; Missing then says what would
	// show it (a capability, a kernel feature). On with no Libraries: no
	// process of the job had a CUDA driver library mapped.
	State   string `json:"state"`
	Missing string `json:"missing,omitempty"`
	// WindowNS is how long the probes counted: from the probing of the
	// libraries mapped at the start (a library mapped later counts from its
	// own probing, within this window).
	WindowNS int64 `json:"window_ns,omitempty"`
	// Libraries are the driver files probed (one set of probes per file,
	// however many processes map it).
	Libraries []DriverLibrary `json:"libraries,omitempty"`
	// Dropped counts calls whose (thread, entry point) row the kernel's
	// bounded table could not hold; Unmatched sync returns whose entry was
	// before the probes (not timed).
	Dropped   uint64 `json:"dropped"`
	Unmatched uint64 `json:"unmatched"`
	// LaunchProbedNS is how long the launch probes were on: in bursts,
	// sized to keep their cost small, unless LaunchContinuous. Launch
	// counts are over that time; LaunchesPerSecond says the rate.
	LaunchProbedNS   int64 `json:"launch_probed_ns,omitempty"`
	LaunchContinuous bool  `json:"launch_continuous,omitempty"`
	// Threads are the threads that called the driver, most calls first.
	Threads []ThreadDriver `json:"threads,omitempty"`
}

// DriverLibrary is one probed driver file.
type DriverLibrary struct {
	Path string `json:"path"`
	// Simulated says it is gpufeed's simulated driver, not libcuda.
	Simulated bool `json:"simulated,omitempty"`
	// Probes is how many entry points were probed; Absent the ones this
	// file does not export (an older driver).
	Probes int      `json:"probes"`
	Absent []string `json:"absent,omitempty"`
	// Errors are entry points that could not be probed, with why.
	Errors []string `json:"errors,omitempty"`
}

// DriverCall is one entry point's count in a thread.
type DriverCall struct {
	Symbol string `json:"symbol"`
	Class  string `json:"class"`
	// Copy is the copy's direction ("HtoD", "DtoH", "DtoD", "any" for
	// cuMemcpy's unified addressing), Async whether it is the async form.
	Copy   string `json:"copy,omitempty"`
	Async  bool   `json:"async,omitempty"`
	Calls  uint64 `json:"calls"`
	Bytes  uint64 `json:"bytes,omitempty"`
	TimeNS int64  `json:"time_ns,omitempty"`
	MaxNS  int64  `json:"max_ns,omitempty"`
}

// ThreadDriver is one thread's driver calls and their sums by class.
type ThreadDriver struct {
	PID   int          `json:"pid"`
	TID   int          `json:"tid"`
	Comm  string       `json:"comm,omitempty"`
	Calls []DriverCall `json:"calls"`
	// The sums by class: kernel launches, graph launches, allocations
	// (and their bytes), frees, copies, syncs and the time inside them.
	Launches      uint64 `json:"launches"`
	GraphLaunches uint64 `json:"graph_launches,omitempty"`
	Allocs        uint64 `json:"allocs,omitempty"`
	AllocBytes    uint64 `json:"alloc_bytes,omitempty"`
	Frees         uint64 `json:"frees,omitempty"`
	Copies        uint64 `json:"copies,omitempty"`
	CopyBytes     uint64 `json:"copy_bytes,omitempty"`
	Syncs         uint64 `json:"syncs,omitempty"`
	SyncNS        int64  `json:"sync_ns,omitempty"`
	// InSync is the sync the thread was still inside when the window
	// ended, and for how long (clipped to the window).
	InSync *PendingCall `json:"in_sync,omitempty"`
}

// Sum fills the class sums from Calls.
func (t *ThreadDriver) Sum() {
	t.Launches, t.GraphLaunches, t.Allocs, t.AllocBytes, t.Frees, t.Copies, t.CopyBytes, t.Syncs, t.SyncNS = 0, 0, 0, 0, 0, 0, 0, 0, 0
	for _, c := range t.Calls {
		switch c.Class {
		case CallLaunch:
			t.Launches += c.Calls
		case CallGraphLaunch:
			t.GraphLaunches += c.Calls
		case CallAlloc:
			t.Allocs += c.Calls
			t.AllocBytes += c.Bytes
		case CallFree:
			t.Frees += c.Calls
		case CallCopy:
			t.Copies += c.Calls
			t.CopyBytes += c.Bytes
		case CallSync:
			t.Syncs += c.Calls
			t.SyncNS += c.TimeNS
		}
	}
	if t.InSync != nil {
		t.SyncNS += t.InSync.SinceNS
	}
}

// Total is the thread's calls of every class.
func (t ThreadDriver) Total() uint64 {
	var n uint64
	for _, c := range t.Calls {
		n += c.Calls
	}
	return n
}

// Call returns the thread's count of entry point sym (zero when none).
func (t ThreadDriver) Call(sym string) DriverCall {
	for _, c := range t.Calls {
		if c.Symbol == sym {
			return c
		}
	}
	return DriverCall{Symbol: sym}
}

// PerSecond is n over the window.
func (d *DriverCalls) PerSecond(n uint64) float64 {
	if d == nil || d.WindowNS <= 0 {
		return 0
	}
	return float64(n) / (float64(d.WindowNS) / 1e9)
}

// LaunchesPerSecond is a thread's kernel launches per second of the time
// the launch probes were on.
func (d *DriverCalls) LaunchesPerSecond(t ThreadDriver) float64 {
	if d == nil || d.LaunchProbedNS <= 0 {
		return 0
	}
	return float64(t.Launches) / (float64(d.LaunchProbedNS) / 1e9)
}

// LaunchRate is LaunchesPerSecond in words: "12000", or "at least 12000"
// when the launches were counted in bursts, during which each probe hit
// slows the launching thread, so the rate read then is below its own.
func (d *DriverCalls) LaunchRate(t ThreadDriver) string {
	r := fmt.Sprintf("%.0f", d.LaunchesPerSecond(t))
	if d != nil && !d.LaunchContinuous {
		r = "at least " + r
	}
	return r
}

// Thread returns thread tid's calls, or false.
func (d *DriverCalls) Thread(tid int) (ThreadDriver, bool) {
	if d == nil {
		return ThreadDriver{}, false
	}
	for _, t := range d.Threads {
		if t.TID == tid {
			return t, true
		}
	}
	return ThreadDriver{}, false
}

// SortThreads orders the threads by calls, most first, then by tid, and
// each thread's calls likewise.
func (d *DriverCalls) SortThreads() {
	for i := range d.Threads {
		c := d.Threads[i].Calls
		sort.Slice(c, func(a, b int) bool {
			if c[a].Calls != c[b].Calls {
				return c[a].Calls > c[b].Calls
			}
			return c[a].Symbol < c[b].Symbol
		})
	}
	sort.Slice(d.Threads, func(i, j int) bool {
		a, b := d.Threads[i].Total(), d.Threads[j].Total()
		if a != b {
			return a > b
		}
		return d.Threads[i].TID < d.Threads[j].TID
	})
}

// PendingCall is a driver call a thread was still inside.
type PendingCall struct {
	Symbol  string `json:"symbol"`
	SinceNS int64  `json:"since_ns"`
}
