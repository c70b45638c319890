package frozen

import "time"

// Stall detection.
const (
	// StallMinWindow: judging "nothing progresses" needs a window longer
	// than the slowest legitimate pause of a healthy step (a checkpoint
	// write, a long collective): 2 s is the shortest window in which an
	// active training loop always shows CPU time (it launches kernels at
	// least every step).
	StallMinWindow = 2 * time.Second
	// StallMinSamples: at least three samples, so a rate is not the
	// difference of two readings taken at the same instant.
	StallMinSamples = 3
	// StallMinWakeups: a thread woken twice out of a wait with no timeout
	// (schedstat's run count) was given something twice: data on its pipe
	// or socket, a lock released, a synchronise returning. A blocked rank, a
	// waiter behind a held lock, a read on a pipe nobody writes are woken
	// zero times; a host thread synchronising with a busy GPU twenty times
	// a second. Wake-ups out of timed waits (a watchdog's 100 ms condition
	// wait, a heartbeat, a sleep) are the thread's own timer and never
	// count. One wake-up alone could be a signal or a stray wake.
	StallMinWakeups = 2
	// StallMaxCPUCores: the whole job used less than 1 % of one core. A
	// job blocked in a collective or on a lock still runs housekeeping
	// (PyTorch's NCCL watchdog wakes about every 100 ms, heartbeat and
	// store threads poll): well under 10 ms of CPU per second. A job doing
	// any work (launching kernels, loading data) uses far more than 1 %.
	StallMaxCPUCores = 0.01
	// StallMaxIOBytesPerSec: less than 1 KiB/s read and written across the
	// job (rchar + wchar, which count pipe and socket traffic too).
	// Heartbeats and store keep-alives move a few bytes a second; a data
	// loader or a checkpoint moves megabytes.
	StallMaxIOBytesPerSec = 1024
	// StallMaxGPUUtil: a GPU whose utilisation never exceeded 5 % ran no
	// work (NVML counts any kernel running in the sample period).
	StallMaxGPUUtil = 5.0
	// StallSpinGPUUtil: a GPU pinned at 90 % or more while the job's CPU
	// does nothing is the signature of a collective kernel spinning on a
	// peer that never arrives (an NCCL hang keeps the kernel resident).
	StallSpinGPUUtil = 90.0
)

// ReapGrace: a parent reaps a child that exited (waking in wait4, its
// /proc/PID/io absorbing the child's counters) within this time of the
// child's last sample; its wake-ups and I/O then are the reaping, not
// progress. Measured here: the next reading on a quiet host, up to three
// readings later at a load average of 7 on 2 CPUs.
const ReapGrace = time.Second

// QuietMinShare: a job that progressed early in the window (a server's
// start-up under diagnose -- CMD, a job freezing just after gpufeed
// attached) is judged stalled or idle over the quiet tail after its last
// sign of progress when that tail holds at least half the window (and
// StallMinWindow, StallMinSamples): what it did most of the window. A
// healthy job's pause (a checkpoint, a slow collective) shorter than half
// the window leaves it judged as working.
const QuietMinShare = 0.5

// Blocked threads.
const (
	// DStateWarn: a thread in uninterruptible sleep (D) for a second or
	// more is waiting on the kernel (storage, NFS, a driver), not on the
	// program. Healthy D sleeps (a page fault, a disk read) last
	// milliseconds.
	DStateWarn = time.Second
	// MaxBlockedRows bounds the blocked-thread table kept in a finding;
	// identical waits are grouped first, so this many groups covers
	// thousands of threads.
	MaxBlockedRows = 40
)

// Copy-on-write growth of forked workers (seed 000 §5 and its drill:
// 60 -> 439 MiB USS per worker over an epoch with a list of objects, 8 MiB
// flat with numpy; seed 004: fork shares every page until one side writes
// it). A page a worker copies leaves the set it shares with its parent and
// enters its own: its unique memory (USS) rises while its resident memory
// (RSS) does not, which tells copying apart from a worker allocating.
// Measured on this project's machine with a real torch 1.13 DataLoader, 4
// forked workers, a 3 M-float dataset, read in order: over a list each
// worker's USS rose 0.35-0.6 MiB/s with RSS flat (1.4-2.4 MiB/s for the
// four); over a numpy array the four together moved 0.1-0.15 MiB/s in
// their first seconds (interpreter objects they touch: bounded), then less.
const (
	// COWMinSamples and COWMinSpan: a slope needs three USS readings over at
	// least 2 s (smaps_rollup is read on the sampler's rollup tier).
	COWMinSamples = 3
	COWMinSpan    = 2 * time.Second
	// COWMinRate: the workers together copy at least 512 KiB/s (1.8 GiB an
	// hour): three to four times what flat storage moves at its start,
	// a third of the list case above.
	COWMinRate = 512 << 10
	// COWMinGrowth: and together they gained at least 2 MiB of unique
	// memory over the window, so a few pages are not called a trend.
	COWMinGrowth = 2 << 20
	// COWMinCopyShare: at least half of the USS growth is not new resident
	// memory (RSS grew by at most half as much): pages that were shared.
	COWMinCopyShare = 0.5
	// COWForkBaseline: what a forked DataLoader worker that copied nothing
	// of its dataset holds of its own once started (the drill's
	// numpy-backed workers: 8 MiB; measured here: 5.6-6.2 MiB). What a
	// worker holds beyond it is what it copied or allocated since.
	COWForkBaseline = 8 << 20
	// COWSettle: a worker's first 3 s are left out. A fresh fork copies and
	// allocates its first few MiB as it starts (measured here: 0.5 -> 6 MiB
	// in about a second, numpy or list alike); that is its baseline, not
	// a trend.
	COWSettle = 3 * time.Second
	// COWWarnHorizon: warn when the projected time to the memory limit is
	// under an hour (an epoch or less).
	COWWarnHorizon = time.Hour
)

// File descriptors (seed 004, "File descriptor exhaustion").
const (
	// FDMinSamples and FDMinSpan: as for COW, a slope needs three readings
	// over 2 s.
	FDMinSamples = 3
	FDMinSpan    = 2 * time.Second
	// FDMinRate: 0.2 descriptors a second (720 an hour) is a leak that
	// exhausts the default soft limit of 1024 within two hours.
	FDMinRate = 0.2
	// FDMinGrowth: and at least 16 more descriptors over the window, so a
	// process opening its first pipes and files at start-up is no leak.
	FDMinGrowth = 16
	// FDHorizon: report a leak when the limit would be reached within a day.
	FDHorizon = 24 * time.Hour
	// FDNearFraction: however flat, a process using 90 % of its soft limit
	// is one burst from EMFILE; FDCriticalFraction 95 % or a projected
	// exhaustion within FDCriticalHorizon is critical.
	FDNearFraction     = 0.90
	FDCriticalFraction = 0.95
	FDCriticalHorizon  = 5 * time.Minute
)

// GIL contention without py-spy (seed 004, "The GIL"): several threads of a
// Python process are busy, yet together they run about one core and want
// little more: while one holds the GIL the others sleep. Measured on this
// project's machine, under load: three pure-Python spinning threads ran 0.8
// to 1.1 cores and wanted (ran + waited in the run queue) 1.4 to 1.6 CPUs;
// three threads hashing (which releases the GIL) wanted 3.0.
const (
	// GILBusyCores: a thread running at least 10 % of a core is busy.
	GILBusyCores = 0.10
	// GILMaxRunCores: together the busy threads ran at most 1.25 cores.
	GILMaxRunCores = 1.25
	// GILMaxDemandPerThread: the CPU they wanted (run + run-queue wait),
	// per busy thread, is at most 0.75: free-running threads want 1.0 each.
	GILMaxDemandPerThread = 0.75
)
