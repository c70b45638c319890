// Package thresholds holds the class-decision thresholds every gpufeed
// classifier shares: live diagnose and recordings (internal/judge) and
// profiler-trace analysis (internal/judge/tracejudge). A verdict must not depend on where
// the numbers came from, so these constants are changed here and only here.
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
	// intervals see a 1 s slow tier twice.
	MinWindow    = 2 * time.Second
	MinIntervals = 20
	// ConfidenceFullWindow: a live verdict's confidence is scaled by the
	// share of this much evidence the window held (judged time over 5 s,
	// at most 1): a 3 s attach carries at most 60 %. Five seconds are five
	// readings of where every sleeping thread waits (the slow tier reads
	// about once a second: the mix of those readings splits the idle time)
	// and fifty 100 ms intervals; for a stall, the pause of a checkpoint or
	// a long collective that a shorter window cannot tell from a hang.
	ConfidenceFullWindow = 5 * time.Second
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
	// this is "over and over" (issue 4's sync-bound): a well-written loop
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
