package timeline

import (
	"path"
	"strings"
)

// The timeline's vocabulary: the words readers write into a timeline and
// judges read out of it. They live here, beside the data, so that neither
// side imports the other: a probe never imports a rule, a rule never
// imports a probe.

// Event kinds (Event.Kind).
const (
	// Written by the sampler while it samples.
	EventProcStart  = "proc-start"
	EventProcExit   = "proc-exit"
	EventThreadExit = "thread-exit"
	EventReadError  = "read-error"
	EventGPUError   = "gpu-error"
	EventGPULost    = "gpu-lost"

	// Written once at the end of a window.
	//
	// EventKernelLog is one recognised kernel log line: Text is the
	// kernel's own words, re-recognised when the timeline is judged, so a
	// recording keeps what the kernel wrote. EventKernelLogUnavailable says
	// why the log could not be read; EventKernelLogCapped that some of it
	// was left out.
	EventKernelLog            = "kmsg"
	EventKernelLogUnavailable = "kmsg-unavailable"
	EventKernelLogCapped      = "kmsg-capped"
	// EventPyStacks is one process's Python stacks as `py-spy dump` printed
	// them (Text); EventPyStacksError says why a dump is missing.
	EventPyStacks      = "py-stacks"
	EventPyStacksError = "py-stacks-error"
	// EventPySamples is one process's Python stacks sampled over the
	// window (profile.PySamples's JSON text: each thread's distinct stacks and
	// how often each was seen, running, holding the GIL).
	EventPySamples = "py-samples"
)

// Unlimited is the value of a resource limit the kernel writes "unlimited"
// (/proc/PID/limits): RLIM_INFINITY, as every reader stores it.
const Unlimited = ^uint64(0)

// NCCLShm names NCCL's shared-memory segments in Collectives.Mapped (one
// entry for all of them: their names are random).
const NCCLShm = "/dev/shm/nccl-*"

// IsNCCL says whether a Collectives.Mapped entry is NCCL (or ROCm's RCCL,
// which PyTorch drives through the same process group and settings).
func IsNCCL(obj string) bool {
	base := path.Base(obj)
	return obj == NCCLShm || strings.HasPrefix(base, "libnccl") || strings.HasPrefix(base, "librccl")
}
