// Package thresholds holds every threshold gpufeed's judges decide by: the
// class decisions live diagnose and recordings (internal/judge) and
// profiler-trace analysis (internal/judge/tracejudge) share, the
// trace-only ones, and frozen-job triage's (internal/judge/frozen). A
// verdict must not depend on where the numbers came from, so these
// constants are changed here and only here.
// Each one says where it comes from: an anchor (a published tool's default)
// where one exists, otherwise the reason for the value. docs/RULES.md lists
// them with the rules that read them.
//
// The package has no dependencies, so any package may import it.
package thresholds

import "time"

// Shares of the analysed time (the observation window, or a trace's steps).
const (
	// ModerateSharePct: a cause that costs at least this share of the
	// analysed time is named as a bottleneck. Anchor: XProf's input-pipeline
	// analysis calls a step "moderately input-bound" from 5 % of step time
	// spent waiting for input (kModeratelyInfeedBoundThresholdInPercent).
	ModerateSharePct = 5.0

	// HighSharePct: from this share a cause is a severe bottleneck. Anchor:
	// XProf's "highly input-bound" at 20 % of step time
	// (kHighlyInfeedBoundThresholdInPercent).
	HighSharePct = 20.0

	// GPUBoundIdleMaxPct: a GPU idle for less than this share of the window
	// is fed, and the verdict is GPU-bound (look at kernel efficiency next).
	// It is the complement of AWS SageMaker Debugger's LowGPUUtilization
	// threshold (70 % at p95) tightened to 90 % busy, because idle time read
	// from a trace or from per-window utilisation is a measurement, not a
	// percentile of noisy samples.
	GPUBoundIdleMaxPct = 10.0

	// DominantCausePct: the verdict's cause is dominant when it explains at
	// least this share of all GPU idle time; below it, other causes compete
	// and the verdict says so.
	DominantCausePct = 60.0
)

// AWS SageMaker Debugger's CPUBottleneck rule defaults: GPU utilisation
// below 10 % while CPU utilisation is above 90 % in more than 50 % of the
// datapoints. Live diagnose reports the rule as evidence for the
// preprocessing class (a trace has no CPU utilisation), and applies its
// CPU threshold to the one thread that launches work (LaunchSaturatedPct).
const (
	CPUBottleneckGPUUtilPct    = 10.0
	CPUBottleneckCPUUtilPct    = 90.0
	CPUBottleneckDatapointsPct = 50.0
)

// The launching thread.
const (
	// LaunchSaturatedPct: a launch thread that runs, or is runnable and waits
	// for a CPU, for at least this share of an interval has no time left to
	// submit more work: that interval's GPU idle is submission overhead.
	// Anchor: SageMaker's CPUBottleneck CPU threshold (90 %), applied to the
	// one core's worth a single thread can use.
	LaunchSaturatedPct = CPUBottleneckCPUUtilPct

	// LaunchWaitPct: a launch thread that waits on a run queue for at least
	// this share of the window is descheduled (000 §7: every CPU stall
	// becomes GPU idle time when kernels are shorter than launches). It is
	// ModerateSharePct: the most that wait can cost the GPU.
	LaunchWaitPct = ModerateSharePct

	// QuotaThrottledPct: a cgroup throttled by its CFS bandwidth limit in
	// at least this share of the periods it ran in spends its quota before
	// the period ends, over and over: its CPU limit, not the host, sets
	// the pace. At the high cut-off: a job throttled now and then (a burst
	// at start-up) is not named.
	QuotaThrottledPct = HighSharePct

	// QuotaMinPeriods: fewer periods than this (ten at the 100 ms default)
	// are too few to tell a share of throttled periods from chance.
	QuotaMinPeriods = 10

	// MemCgroupMinRate: a memory cgroup's anonymous memory growing slower
	// than this (1 MiB/s, 3.5 GiB an hour) is not projected: the noise of
	// allocator pools and caches at the slow tier's readings.
	MemCgroupMinRate = 1 << 20
	// MemCgroupMinReadings: a growth rate from fewer slow-tier readings
	// (about a second apart) is not projected.
	MemCgroupMinReadings = 3
)

// The input pipeline (the job's threads other than the launch thread).
const (
	// ProducerBusyPct: the job's other threads ran or waited to run at least
	// half a core's worth while the launch thread waited for input: the input
	// pipeline is computing, so the wait is preprocessing (002: "cœurs CPU
	// saturés en espace utilisateur"). Half a core, not a whole one, because
	// a pipeline that computes half the time and waits on nothing else still
	// sets the pace.
	ProducerBusyPct = 50.0

	// ProducerIOWaitPct: the job's other threads spent, summed, at least a
	// quarter of a thread's time in uninterruptible sleep (D: disk reads)
	// while the launch thread waited for input: the input waits on storage
	// (002 type 3). Anchor: 002 Task 7's example shows 22.9 % iowait as the
	// storage-bound signal; a quarter of one reader's time is the same order.
	ProducerIOWaitPct = 25.0
)

// Transfers.
const (
	// PCIeAchievableShare is the share of a link's raw rate that copies
	// reach: bandwidthTest reports about 25 GB/s on Gen4 x16's 31.5 GB/s.
	// The copy engines' busy share is estimated as throughput over this.
	PCIeAchievableShare = 0.8

	// LinkSaturatedPct: copies moving at least this share of the achievable
	// link rate saturate it: the GPU waits on PCIe (002 "Vous êtes limité par
	// le PCIe"), whatever the CPU does.
	LinkSaturatedPct = 80.0

	// TransferMinCopyPct: when the launch thread waits on the device and the
	// copy engines are busy at least this share of the interval and at least
	// as long as kernels run, the wait is a copy (a pageable or synchronous
	// transfer), not a synchronisation. ModerateSharePct: the least a cause
	// must cost to be named.
	TransferMinCopyPct = ModerateSharePct
)

// The window.
const (
	// MinWindow and MinIntervals: below either, the verdict is inconclusive:
	// a few intervals cannot separate a pattern from noise (SageMaker's
	// "more than half the datapoints" needs datapoints). Twenty 100 ms
	// intervals see the slow tier eight times (every 250 ms in a 2 s window).
	MinWindow    = 2 * time.Second
	MinIntervals = 20
	// ConfidenceZ: a verdict's confidence is multiplied by the least share
	// of its intervals that carry its cause, at one-sided 95 % (Wilson's
	// score bound with z = 1.645), counting at most ConfidenceMaxIntervals
	// of them: 30 of 30 intervals (a 3 s window) give 92 %, and so do 100
	// of 100 (10 s).
	ConfidenceZ = 1.645
	// ConfidenceMaxIntervals: the bound counts the share of the intervals
	// that carry a cause as if at most this many had been read. A window's
	// intervals are consecutive readings of one job, not independent
	// trials of whether the verdict is right: counted in full, the bound
	// grew with the window alone (29 of 30 carrying a cause gave 86 %, 97
	// of 100 93 %, the same job), and confidence must not follow the
	// window's length. Thirty is a 3 s window at the default interval.
	ConfidenceMaxIntervals = 30
	// IndistinctMaxConfidence: a submission-bound verdict carried by the
	// launch thread's running time, with no probe that saw what it ran
	// (CPU profile, driver calls), is one of three readings of the same
	// /proc picture (launching, its own input work, a spinning sync): at
	// most a third.
	IndistinctMaxConfidence = 0.33
	// MinIntervalsSampled: slots a late tick skipped (an overrun: a loaded
	// host delayed the sampler) count toward MinIntervals, as long as at
	// least this many intervals were sampled: the window's span is what a
	// pattern needs, and a loaded host must not make a requested 2 s window
	// too short; half the datapoints still separate a pattern from noise.
	MinIntervalsSampled = MinIntervals / 2
)

// Other findings.
const (
	// PeggedCorePct and IdleCoresPct: one CPU busy at least 90 % while the
	// others average under 25 %. Anchor: 002 Task 6's mpstat (CPU 7 at 98 %
	// user, the system 75 % idle: "cela sent le goulot mono-thread").
	PeggedCorePct = CPUBottleneckCPUUtilPct
	IdleCoresPct  = 25.0
	// PeggedJobSharePct: the pegged CPU is the job's when its own threads
	// ran at least half of that CPU's time (schedstat run time, by the CPU
	// each thread last ran on); otherwise the load is a neighbour's and
	// the finding says so instead of blaming the job's threads.
	PeggedJobSharePct = 50.0

	// OversubscribedTicksPct: the job's runnable threads outnumber the cores
	// it may use in more than half of the samples (SageMaker's "more than
	// half the datapoints").
	OversubscribedTicksPct = CPUBottleneckDatapointsPct

	// ClockDropPct: between bursts the SM clock falls below this share of its
	// maximum: the GPU is idle long enough to downclock (002 Task 1, Task 11).
	ClockDropPct = 50.0
	// ClockThrottledPct: while the GPU is busy (at least 100 -
	// GPUBoundIdleMaxPct), an SM clock below this share of its maximum is
	// throttling (power or thermal: 002 "GPU clocks low under load").
	ClockThrottledPct = 80.0
)

// Trace-only thresholds (a live sampler cannot see single launches).
const (
	// LaunchRuntimeOutlier: a kernel-launch runtime call longer than this is
	// an outlier. Anchor: HTA get_cuda_kernel_launch_stats runtime_cutoff (50 us).
	LaunchRuntimeOutlier = 50 * time.Microsecond
	// LaunchDelayOutlier: a kernel starting this long after its launch call
	// returned is a launch-delay outlier. Anchor: HTA launch_delay_cutoff (100 us).
	LaunchDelayOutlier = 100 * time.Microsecond
	// ConsecutiveKernelDelay: a gap between two GPU operations shorter than
	// this is launch overhead between back-to-back kernels, not starvation.
	// Anchor: HTA get_idle_time_breakdown consecutive_kernel_delay (30 us).
	ConsecutiveKernelDelay = 30 * time.Microsecond
	// SyncsPerStepMax: more host synchronisations per training step than
	// this is synchronising "over and over" (sync-bound): a well-written loop
	// needs at most one (reading the loss) per step.
	SyncsPerStepMax = 2
	// TooLittleWorkBlocksPerSM: kernels that give each SM less than one
	// thread block leave SMs empty however busy the GPU looks. Anchor:
	// Kineto's "blocks per SM" kernel argument (grid blocks / SM count).
	TooLittleWorkBlocksPerSM = 1.0
	// TooLittleWorkKernelTimePct: too-little-work when at least this share of
	// kernel time runs such under-filled kernels.
	TooLittleWorkKernelTimePct = 50.0
)

// Python time shares (diagnose --py-stacks sampling).
const (
	// PythonStageSharePct: a feeding thread that spends this share of its
	// samples in one stage (the DataLoader's __next__, transforms, a
	// copy back to the host, the optimizer) has found its bottleneck;
	// under it, the shares are reported as information.
	PythonStageSharePct = 30.0
	// GILHolderSharePct: another thread holding the GIL in this share of
	// its samples is named as the holder (python-time).
	GILHolderSharePct = 50.0
	// GILHolderRoundsPct: in gil-contention, every thread seen holding the
	// GIL in at least this share of the sampling rounds is named among the
	// holders (three threads taking turns hold it about a third each).
	GILHolderRoundsPct = 10.0
)

// Trace judgement: the Nsight Systems rules it reproduces, the least a
// trace must hold for a verdict, and how much evidence makes one sure.
const (
	// NsightGapThresholdNs is the smallest GPU idle gap the gaps rule lists.
	// Anchor: Nsight Systems' gpu_gaps rule default (gap=500 ms).
	NsightGapThresholdNs = int64(500e6)
	// NsightLowUsePct and NsightLowUseChunks: the low-use rule splits each
	// device's active span into equal chunks and lists those whose GPU time
	// is below the percentage. Anchor: Nsight Systems' gpu_time_util rule
	// defaults (threshold=50, chunks=30).
	NsightLowUsePct    = 50.0
	NsightLowUseChunks = 30

	// CopiesDominatePct: host-device copies filling at least half the GPU's
	// busy time make the job transfer-bound even without idle time (copy
	// engines busy while the SMs wait).
	CopiesDominatePct = 50.0

	// TraceMinGPUOps and TraceMinSpanNs: below these a trace is too short
	// for a verdict (inconclusive, saying that a longer trace would make it
	// conclusive): a handful of operations or a millisecond of activity
	// shows an accident, not a pattern.
	TraceMinGPUOps = 10
	TraceMinSpanNs = int64(1e6)

	// The evidence a trace verdict needs before its confidence is full. A
	// cause seen in TraceEvidenceFullGaps comparable gaps, spread over
	// TraceEvidenceFullSteps steps, in TraceEvidenceFullSpanNs of GPU
	// activity is a pattern; below, each term scales down (gaps and steps
	// linearly, time logarithmically from TraceMinSpanNs), and the smallest
	// term bounds the confidence. Two steps is what the profiling schedule
	// the reports recommend (wait=1, warmup=1, active=3) leaves once the
	// last step, in which the profiler stops, is dropped. Below
	// TraceEvidenceMin the verdict is inconclusive: the leading cause is
	// named, not concluded.
	TraceEvidenceFullGaps   = 5.0
	TraceEvidenceFullSteps  = 2.0
	TraceEvidenceFullSpanNs = int64(100e6)
	TraceEvidenceMin        = 0.3

	// RankBusyPct: a rank's launch thread wanting at least this share of a
	// core (running plus run-queue wait) is busy. RankWaitPct: a rank waits
	// for its peers when its launch thread sleeps at least this share of the
	// window's samples and at least RankWaitPct of the readings of where it
	// slept are peer waits (futex, socket, poll: a collective). A straggler
	// is named when every other rank waits and it alone does not.
	RankBusyPct = 50.0
	RankWaitPct = 60.0
	// StragglerPeerGap: a rank whose waits are mixed is the straggler only
	// when its share of peer waits is at least this many points under every
	// waiting rank's.
	StragglerPeerGap = 40.0

	// StragglerLagPct: a rank is a straggler when it enters collectives at
	// least this share of the median step time after the first rank.
	// Anchor: ModerateSharePct (XProf's 5 %), applied to step time.
	StragglerLagPct = ModerateSharePct
	// LaunchQueueFullShare: a stream's launch queue at this share of CUDA's
	// pending-launch capacity is full: the CPU ran ahead until launches
	// blocked (HTA's queue length analysis).
	LaunchQueueFullShare = 0.9
	// ShortKernelsShare: HTA's short kernels (shorter than their launch
	// call) are a pattern from this share of all launched operations.
	ShortKernelsShare = 0.5
)

// Frozen-job triage (internal/judge/frozen): progress, blocked threads,
// copy-on-write growth, file descriptors, GIL contention.

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
	// count. One wake-up alone could be a signal or a stray wake. Weighed
	// against the run count (the safe side: a second slice may be a
	// preemption), while the claim counts readings.
	StallMinWakeups = 2
	// StallMaxCPUCores: the whole job used less than 1 % of one core. A
	// job blocked in a collective or on a lock still runs housekeeping
	// (PyTorch's NCCL watchdog wakes about every 100 ms, heartbeat and
	// store threads poll): well under 10 ms of CPU per second. A job doing
	// any work (launching kernels, loading data) uses far more than 1 %.
	StallMaxCPUCores = 0.01
	// ForkMinCount and ForkMinPerSec: a job that starts at least this many
	// processes, at least this often, over a span is not stalled: it
	// keeps doing something, even when each child exits before it can be
	// sampled and the parent only wakes to reap it (a fork storm of 500
	// children a second was judged stalled). A monitor that runs a
	// command every few seconds inside a stalled job stays under it.
	ForkMinCount  = 5
	ForkMinPerSec = 1.0
	// TimerPollMaxCPUPerWake: a thread woken only out of its own timed
	// waits that runs at most this long per wake-up is a poll loop
	// re-arming, and its CPU is housekeeping, whatever it sums to: gloo's
	// device loop wakes from a 10 ms epoll_wait about 100 times a second
	// at ~40 µs a wake-up (measured on a deadlocked three-rank gloo job:
	// three such loops, 1.1-1.2 % of a core between them). A thread that
	// does work on each tick (a sleep-paced loop) runs milliseconds.
	TimerPollMaxCPUPerWake = 200 * time.Microsecond
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

// A job whose start-up lies in the window (it started at most StartUpInView
// before it: diagnose -- CMD, or cmd & gpufeed diagnose --pid $!), whose GPU
// did no work over the whole window, and whose every thread has waited for
// requests or a timer for at least IdleAfterStartUpMinSpan since its last
// sign of progress, is idle since its start-up ended even when that tail is
// shorter than StallMinWindow or half the window: a server importing its
// modules from a cold page cache on a loaded host took 2-3 s of a 4 s
// window and was called "too little work". A start-up is not a healthy
// step pausing (no step ran: the GPU was idle throughout), and the tail
// makes the job idle only, never stalled. 1 s is ten samples at the
// default interval, and longer than the gaps between a start-up's own
// reads and wake-ups.
const (
	StartUpInView           = time.Second
	IdleAfterStartUpMinSpan = time.Second
)

// A window that holds a job's start-up and none of its steps (job-starting)
// is one whose GPU, besides staying under StallMaxGPUUtil, worked (a sample
// above GPUWorkMinUtil, or an operation completed) at most within one
// span of StartUpWarmUpMaxSpan: a warm-up kernel or a device check. A job
// launching small kernels throughout the window (too little work: 2 % of
// the GPU, thousands of completions spread over 10 s) is working. 1 %
// leaves out the device's idle noise; 1 s covers NVML's longest
// utilisation period, over which one warm-up kernel shows in every sample.
const (
	GPUWorkMinUtil       = 1.0
	StartUpWarmUpMaxSpan = time.Second
)

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

// Copy-on-write growth of forked workers (the DataLoader copy-on-write drill:
// 60 -> 439 MiB USS per worker over an epoch with a list of objects, 8 MiB
// flat with numpy; fork shares every page until one side writes
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
	// COWInheritedBaseline: what a fresh fork holds of its own in the
	// anonymous mappings it inherited (smaps Private_Dirty at the same
	// addresses as its parent's): the pages it wrote as it started.
	// Measured here, torch 1.13 DataLoader workers over a numpy array:
	// 4 MiB each, flat from their first second to the 90th; over a list
	// of 3 M floats read in order: 5-6 MiB at 3 s, then 0.4 MiB/s each.
	COWInheritedBaseline = 6 << 20
	// COWMinCopied: the copies are reported whatever their rate once the
	// workers together hold 16 MiB more than as many fresh forks (the list
	// above on a loaded host: 26 MiB more 35 s after the fork, 96 MiB at
	// 95 s; the numpy array: none)...
	COWMinCopied = 16 << 20
	// COWMinCopiedShare: ...and each holds, on average, 5 % or more of what
	// the parent holds in those mappings (the list above: 8 % at 30 s, 18 %
	// at 90 s; the numpy array: 3 %, the interpreter's own objects).
	COWMinCopiedShare = 0.05
	// COWMinCopiedRate: measured in the inherited mappings themselves
	// (smaps), the copies grow only by copy-on-write, so a lower rate than
	// COWMinRate counts: 128 KiB/s together, with COWMinGrowth gained over
	// the window. The list above on a host loaded to 8 runnable tasks per
	// CPU: 0.27 MiB/s; the numpy array: flat after its first second.
	COWMinCopiedRate = 128 << 10
	// COWWarnShare: copies taking a tenth of the memory limit (the memory
	// cgroup's, else the host's MemTotal) are a warning however they move.
	COWWarnShare = 0.10
)

// File descriptors .
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

// GIL contention without py-spy : several threads of a
// Python process are busy, yet together they run about one core and want
// little more: while one holds the GIL the others sleep. Measured on this
// project's machine, under load: three pure-Python spinning threads ran 0.8
// to 1.1 cores and wanted (ran + waited in the run queue) 1.4 to 1.6 CPUs;
// three threads hashing (which releases the GIL) wanted 3.0.
const (
	// GILBusyCores: a thread that wants at least 10 % of a CPU (runs or
	// waits in the run queue for one) is busy; on a saturated host (load
	// 10 on 2 CPUs) each of three spinning threads ran 3 % of a core.
	GILBusyCores = 0.10
	// GILMaxRunCores: together the busy threads ran at most 1.25 cores.
	GILMaxRunCores = 1.25
	// GILMaxDemandPerThread: the CPU they wanted (run + run-queue wait),
	// per busy thread, is at most 0.75: free-running threads want 1.0 each.
	GILMaxDemandPerThread = 0.75
)

// MemCgroupHorizon: a memory cgroup that would reach its limit later than
// this at its current growth is not named: over an hour, a growth seen in a
// window of seconds says little about the next hour.
const MemCgroupHorizon = time.Hour
