package finding

import "time"

// Class-decision thresholds shared by every classifier: live diagnose and
// recordings (internal/rules) and profiler-trace analysis
// (internal/trace/analysis). A verdict must not depend on where the numbers
// came from, so these constants are changed here and only here. Each says
// where it comes from.

const (
	// ModerateSharePct: a cause that costs at least this share of the
	// analysed time (step time, or the observation window) is named as a
	// bottleneck. Anchor: XProf's input-pipeline analysis calls a step
	// "moderately input-bound" from 5 % of step time spent waiting for input
	// (kModeratelyInfeedBoundThresholdInPercent).
	ModerateSharePct = 5.0

	// HighSharePct: from this share a cause is a severe bottleneck (warning
	// severity, high confidence). Anchor: XProf's "highly input-bound" at 20 %
	// of step time (kHighlyInfeedBoundThresholdInPercent).
	HighSharePct = 20.0

	// GPUBoundIdleMaxPct: a GPU idle for less than this share of the window
	// is fed: the verdict is GPU-bound (look at kernel efficiency next). It is
	// the complement of SageMaker Debugger's LowGPUUtilization p95 threshold
	// (70 %) tightened to 90 % busy, because idle time measured from a trace
	// or from NVML samples is exact, not a percentile of noisy samples.
	GPUBoundIdleMaxPct = 10.0

	// DominantCausePct: the verdict's confidence is high when its cause
	// explains at least this share of all attributed idle time; below it,
	// other causes compete and confidence is reduced.
	DominantCausePct = 60.0

	// SyncsPerStepMax: more host synchronisations per training step than this
	// is "over and over" (issue 4's sync-bound): a well-written loop needs at
	// most one (reading the loss) per step.
	SyncsPerStepMax = 2

	// CPUBottleneckGPUUtilPct, CPUBottleneckCPUUtilPct and
	// CPUBottleneckDatapointsPct are AWS SageMaker Debugger's CPUBottleneck
	// rule defaults: GPU utilisation below 10 % while CPU utilisation is above
	// 90 % in more than 50 % of the datapoints. Live diagnose uses them for
	// submission- and preprocessing-bound; a trace has no CPU utilisation.
	CPUBottleneckGPUUtilPct    = 10.0
	CPUBottleneckCPUUtilPct    = 90.0
	CPUBottleneckDatapointsPct = 50.0

	// TooLittleWorkBlocksPerSM: kernels that give each SM less than one
	// thread block leave SMs empty however busy the GPU looks. Anchor:
	// Kineto's "blocks per SM" kernel argument (grid blocks / SM count).
	TooLittleWorkBlocksPerSM = 1.0
	// TooLittleWorkKernelTimePct: too-little-work when at least this share of
	// kernel time runs such under-filled kernels.
	TooLittleWorkKernelTimePct = 50.0
)

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
)
