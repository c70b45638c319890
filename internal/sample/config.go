// Package sample is gpufeed's live sampler: it follows a target process and
// all its descendants (DataLoader workers, torchrun ranks) as they appear and
// disappear, every thread of each, the host, and optionally the GPUs, on a
// tiered schedule, and fills a timeline.Timeline (streaming it to a recorder
// as it goes).
//
// The fast tier (every interval) costs one pread per kept file: stat and
// schedstat per thread, statm per process, /proc/stat for the host. The slow
// tier (about once a second) reads per-thread status (context switches),
// where blocked threads wait, per-process status, io and fd counts, and the
// host's PSI, meminfo and diskstats. smaps_rollup (PSS/USS) runs on its own
// rarer tier, stretched further when it costs more than its CPU budget.
package sample

import (
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Defaults for Config's zero values.
const (
	// DefaultInterval is the per-thread sampling period: fine enough to see a
	// launch thread's stalls against a GPU's per-100-ms utilisation windows,
	// cheap enough for 1,000-thread jobs (see docs/PERFORMANCE.md).
	DefaultInterval = 100 * time.Millisecond
	// DefaultDuration is diagnose's window.
	DefaultDuration = 10 * time.Second
	// DefaultSlowEvery is the slow tier: status (context switches are
	// counters, a second is enough to rate them) and the blocked-thread
	// details. A window shorter than SlowReadings of it reads every
	// SlowReadings-th of the window instead, at most every MinSlowEvery.
	DefaultSlowEvery = time.Second
	// SlowReadings is how many slow-tier readings a window shorter than
	// SlowReadings × DefaultSlowEvery still gets: where a sleeping launch
	// thread waits is read on the slow tier, and the judge splits its sleep
	// by the share of those readings on each kind of wait. Over 3 s at one a
	// second that was three readings, one unlucky one a third of its sleep;
	// over 10 s, a tenth. A shorter window thus reads as often as the
	// default 10 s window in all (never more slow ticks than it), at a
	// higher rate for its few seconds.
	SlowReadings = 10
	// MinSlowEvery bounds the scaled slow tier: a 2 s window (the shortest
	// judged) reads every 250 ms, eight times.
	MinSlowEvery = 250 * time.Millisecond
	// DefaultRollupEvery is the smaps_rollup tier; PSS/USS drift slowly
	// (copy-on-write growth shows over seconds to minutes). Windows shorter
	// than 20 s read every quarter of the window (at most once a slow tick).
	DefaultRollupEvery = 5 * time.Second
	// DefaultRollupBudget is the share of one core smaps_rollup may use: the
	// kernel walks every mapping (milliseconds per GiB resident), so a process
	// whose read costs c waits at least c/budget before the next one.
	DefaultRollupBudget = 0.01
	// DefaultRollupJobBudget is the share of one core the memory readings
	// of all the job's processes may use together, counted from the
	// window's start: a DataLoader job's parent and each worker read at
	// 1 % each cost a 16-worker job some 14 % (two readings of smaps per
	// worker, about 17 ms each for a worker holding torch). The window's
	// first and last readings of every process are always taken (the
	// level of what each worker copied, and its change over the window);
	// between them a due reading waits while the job's readings have
	// used more than this share of the time since the start.
	DefaultRollupJobBudget = 0.03
	// DefaultMaxSamples is diagnose's budget of thread samples held in
	// memory for one window: every live thread's sample is kept each tick
	// (88 bytes, and the slow tier's details), and the window is judged
	// whole at its end. Measured, a window costs gpufeed about 170 bytes of
	// resident memory a sample with the Go heap's slack (plus what its
	// judgement builds): 2,000,000 is about 350 MB. A 1,000-thread job is
	// watched for 3m20s at the default interval and 33m20s at 1 s; a
	// 10,000-thread job for 20 s and 3m20s. Unbounded, an hour of a
	// 1,000-thread job at 100 ms held 36 million samples (6 GB).
	DefaultMaxSamples = 2_000_000
	// EndedBudget is Timeline.Meta.Ended for a window cut at MaxSamples.
	EndedBudget = "memory budget reached"
)

// Config.Sched's values.
const (
	SchedAuto = "auto"
	SchedBPF  = "bpf"
	SchedProc = "proc"
)

// Recorder receives the timeline as it is sampled, so a recording survives a
// crash up to its last flushed tick. timeline.Writer implements it.
type Recorder interface {
	WriteMeta(timeline.Meta) error
	WriteDevices([]gpu.DeviceInfo) error
	WriteProc(*timeline.ProcInfo) error
	WriteThread(*timeline.ThreadInfo) error
	WriteTick(*timeline.Tick) error
	WriteEvent(timeline.Event) error
}

// Progress is called after each tick with the time sampled so far.
type Progress func(elapsed, window time.Duration, procs, threads int)

// Config says what to sample and how.
type Config struct {
	// FS is where /proc and /sys are read (the zero value: /proc and /sys).
	FS procfs.FS
	// PID is the target; its descendants are followed.
	PID int
	// Command and Launched describe a target gpufeed started itself.
	Command  []string
	Launched bool
	// TargetDone, when set, is closed once a launched target has been reaped.
	TargetDone <-chan struct{}
	// Release, when set, is called once the sampler is ready, just before
	// the window's first reading, on the goroutine that calls Run: a
	// launched target held before its execve (Held) runs from there, so
	// its start-up is in the window. Its error ends the run.
	Release func() error
	Held    bool
	// SharedProcess says the sampler shares its process with other work
	// (the agent: other jobs' samplers, its HTTP server, judging): the
	// observer's CPU is then the sampler's ticks' own, each measured on the
	// OS thread it ran on (RUSAGE_THREAD, the goroutine locked to it for
	// the tick), not the whole process's (RUSAGE_SELF).
	SharedProcess bool

	Interval     time.Duration
	Duration     time.Duration
	SlowEvery    time.Duration
	RollupEvery  time.Duration
	RollupBudget float64
	// RollupJobBudget bounds the memory readings of all processes
	// together between the window's ends (DefaultRollupJobBudget).
	RollupJobBudget float64

	// GPU may be nil; GPUSource names it or says why there is none.
	GPU       gpu.Source
	GPUSource string

	// DiscoverEvery is how often the process tree is listed for new
	// descendants (0: every tick). A long-running watcher at a low tier
	// (gpufeed agent) lists it on its slow tier: listing /proc costs more
	// than sampling a small tree.
	DiscoverEvery time.Duration

	// MaxKeptFiles caps the per-thread descriptors held open (0: the
	// open-file limit less a reserve); threads past it are read by opening.
	MaxKeptFiles int

	// Sched says where the threads' run time, run-queue wait, slices and
	// switches come from: SchedAuto (the kernel's counters read by a BPF
	// task iterator where this process may load it, else /proc), SchedBPF
	// (the counters, or fail), SchedProc or "" (/proc: schedstat and status per
	// thread). A tree that is not the host's /proc is always read from it.
	Sched string
	// schedFailAt makes the scheduler's reading fail from that time in
	// the window on (tests of the fall back to /proc).
	schedFailAt time.Duration
	// waitsFromProc reads where threads wait from /proc with the kernel's
	// counters too (tests comparing both).
	waitsFromProc bool

	// MaxSamples, when positive, bounds the window's memory: the window
	// ends (Meta.Ended EndedBudget, with a note saying how long it ran and
	// how to watch longer) before a tick would take the thread samples held
	// past it. Warn, when set, is told after the first tick when the job's
	// threads will reach it before the window's end. Zero: no bound (the
	// agent and the live view hold windows of their own size).
	MaxSamples int
	Warn       func(string)
	// MinIntervals is the fewest intervals a judged window holds: the
	// interval MaxSamples' note offers leaves the window at least these.
	MinIntervals int

	Tool     string
	Recorder Recorder
	Progress Progress
}

func (c *Config) defaults() {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Duration <= 0 {
		c.Duration = DefaultDuration
	}
	if c.SlowEvery <= 0 {
		c.SlowEvery = DefaultSlowEvery
		if r := c.Duration / SlowReadings; r < c.SlowEvery {
			c.SlowEvery = max(r, MinSlowEvery)
		}
	}
	if c.SlowEvery < c.Interval {
		c.SlowEvery = c.Interval
	}
	if c.RollupEvery <= 0 {
		c.RollupEvery = DefaultRollupEvery
		// A short window still reads each process's PSS/USS at least four
		// times (a slope needs three readings): every quarter of the
		// window, not more often than the slow tier. The CPU budget below
		// still stretches the reads of a large process.
		if q := c.Duration / 4; q < c.RollupEvery {
			c.RollupEvery = max(q, c.SlowEvery)
		}
	}
	if c.RollupBudget <= 0 {
		c.RollupBudget = DefaultRollupBudget
	}
	if c.RollupJobBudget <= 0 {
		c.RollupJobBudget = DefaultRollupJobBudget
	}
}
