package tracejudge

// Trace-analysis thresholds that do not decide a class (those are shared
// with live diagnose in internal/rules/thresholds).
const (
	// NsightGapThreshold is the smallest GPU idle gap the gaps rule lists.
	// Anchor: Nsight Systems' gpu_gaps rule default (gap=500 ms).
	NsightGapThreshold = int64(500e6)
	// NsightLowUsePct and NsightLowUseChunks: the low-use rule splits each
	// device's active span into equal chunks and lists those whose GPU time
	// is below the percentage. Anchor: Nsight Systems' gpu_time_util rule
	// defaults (threshold=50, chunks=30).
	NsightLowUsePct    = 50.0
	NsightLowUseChunks = 30
)

// Below these, a trace is too short for a verdict (issue 4: "inconclusive,
// with what would make it conclusive (too short a window)"): a handful of
// operations or a millisecond of activity shows an accident, not a pattern.
const (
	MinGPUOps = 10
	MinSpanNs = int64(1e6)
)
