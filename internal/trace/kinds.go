package trace

import "strings"

// GPUKind is what a GPU operation is.
type GPUKind uint8

const (
	Kernel GPUKind = iota
	Memcpy
	Memset
	// GPUSync is a device-side record of a host synchronisation (Kineto's
	// cuda_sync category, Nsight's CUPTI_ACTIVITY_KIND_SYNCHRONIZATION). It is
	// not GPU work: idle and busy time ignore it.
	GPUSync
)

func (k GPUKind) String() string {
	switch k {
	case Kernel:
		return "kernel"
	case Memcpy:
		return "memcpy"
	case Memset:
		return "memset"
	case GPUSync:
		return "sync"
	}
	return "gpu-op"
}

// IsWork reports whether the op occupies the GPU (kernels, copies, memsets).
func (k GPUKind) IsWork() bool { return k != GPUSync }

// CopyKind is the direction of a memcpy.
type CopyKind uint8

const (
	CopyUnknown CopyKind = iota
	HtoD
	DtoH
	DtoD
	HtoH
	PtoP
)

func (c CopyKind) String() string {
	switch c {
	case HtoD:
		return "HtoD"
	case DtoH:
		return "DtoH"
	case DtoD:
		return "DtoD"
	case HtoH:
		return "HtoH"
	case PtoP:
		return "PtoP"
	}
	return "unknown"
}

// MemKind is the kind of memory a copy reads or writes.
type MemKind uint8

const (
	MemUnknown MemKind = iota
	Pageable
	Pinned
	DeviceMem
	Managed
	Array
	// HostMem is host memory whose kind the profiler did not record (ROCm
	// traces say "Host").
	HostMem
)

func (m MemKind) String() string {
	switch m {
	case Pageable:
		return "pageable"
	case Pinned:
		return "pinned"
	case DeviceMem:
		return "device"
	case Managed:
		return "managed"
	case Array:
		return "array"
	case HostMem:
		return "host"
	}
	return "unknown"
}

// RuntimeKind is what a runtime call does, as far as feeding the GPU goes.
type RuntimeKind uint8

const (
	RuntimeOther RuntimeKind = iota
	// Launch enqueues a kernel (cudaLaunchKernel, hipLaunchKernel, cuLaunchKernel, graph launches).
	Launch
	// MemcpyAsync enqueues a copy without waiting (unless memory is pageable).
	MemcpyAsync
	// MemcpySync blocks the host until the copy is done (cudaMemcpy, hipMemcpyWithStream).
	MemcpySync
	MemsetAsync
	MemsetSync
	// StreamSync, DeviceSync and EventSync block the host until GPU work completes.
	StreamSync
	DeviceSync
	EventSync
	// StreamWaitEvent orders streams on the GPU; it does not block the host.
	StreamWaitEvent
)

func (k RuntimeKind) String() string {
	switch k {
	case Launch:
		return "launch"
	case MemcpyAsync:
		return "memcpy-async"
	case MemcpySync:
		return "memcpy-sync"
	case MemsetAsync:
		return "memset-async"
	case MemsetSync:
		return "memset-sync"
	case StreamSync:
		return "stream-sync"
	case DeviceSync:
		return "device-sync"
	case EventSync:
		return "event-sync"
	case StreamWaitEvent:
		return "stream-wait-event"
	}
	return "other"
}

// Enqueues reports whether calls of this kind put work on a GPU queue.
func (k RuntimeKind) Enqueues() bool {
	switch k {
	case Launch, MemcpyAsync, MemcpySync, MemsetAsync, MemsetSync:
		return true
	}
	return false
}

// IsSync reports whether calls of this kind block the host until GPU work
// finishes (explicit synchronisations and blocking copies and memsets).
func (k RuntimeKind) IsSync() bool {
	switch k {
	case StreamSync, DeviceSync, EventSync, MemcpySync, MemsetSync:
		return true
	}
	return false
}

// ClassifyRuntime names the kind of a CUDA/HIP runtime or driver call from its
// name. Suffixes after an underscore (Nsight's version "_v3020", the
// per-thread-stream "_ptsz") are ignored.
func ClassifyRuntime(name string) RuntimeKind {
	if k, ok := classifyMTIARuntime(name); ok {
		return k
	}
	if i := strings.IndexByte(name, '_'); i > 0 {
		name = name[:i]
	}
	var rest string
	switch {
	case strings.HasPrefix(name, "cuda"):
		rest = name[4:]
	case strings.HasPrefix(name, "hip"):
		rest = name[3:]
	case strings.HasPrefix(name, "cu"):
		rest = name[2:]
	default:
		return RuntimeOther
	}
	switch rest {
	case "StreamSynchronize":
		return StreamSync
	case "DeviceSynchronize", "CtxSynchronize", "ThreadSynchronize":
		return DeviceSync
	case "EventSynchronize":
		return EventSync
	case "StreamWaitEvent":
		return StreamWaitEvent
	}
	switch {
	case strings.HasPrefix(rest, "LaunchKernel"), strings.HasPrefix(rest, "LaunchCooperativeKernel"),
		strings.HasPrefix(rest, "ExtLaunchKernel"), strings.HasPrefix(rest, "ModuleLaunchKernel"),
		strings.HasPrefix(rest, "ExtModuleLaunchKernel"), strings.HasPrefix(rest, "GraphLaunch"),
		rest == "LaunchHostFunc":
		return Launch
	case strings.HasPrefix(rest, "Memcpy"):
		if strings.Contains(rest, "Async") {
			return MemcpyAsync
		}
		return MemcpySync
	case strings.HasPrefix(rest, "Memset"), strings.HasPrefix(rest, "MemsetD"):
		if strings.Contains(rest, "Async") {
			return MemsetAsync
		}
		return MemsetSync
	}
	return RuntimeOther
}

// classifyMTIARuntime names the kind of an MTIA runtime call (Kineto's
// mtia_runtime category), whose names follow neither CUDA's nor HIP's:
// "runFunction - job_prep_and_submit_for_execution" launches a kernel (HTA's
// kernel-launch pattern is ^runFunction, hta/common/types.py), "enqueueCommand
// memcpyHtoDAsync" enqueues a copy, "enqueueCommand waitOnEvent" orders
// streams, "synchronizeStream" blocks the host. The bare "synchronize" MTIA
// records on the device's own process, with the correlation id of the host's
// synchronizeStream, is the device-side record of that wait and stays other.
func classifyMTIARuntime(name string) (RuntimeKind, bool) {
	switch {
	case strings.HasPrefix(name, "runFunction"):
		return Launch, true
	case name == "synchronizeStream":
		return StreamSync, true
	}
	cmd, ok := strings.CutPrefix(name, "enqueueCommand ")
	if !ok {
		return RuntimeOther, false
	}
	switch {
	case strings.HasPrefix(cmd, "memcpy"):
		if strings.HasSuffix(cmd, "Async") {
			return MemcpyAsync, true
		}
		return MemcpySync, true
	case strings.HasPrefix(cmd, "memset"):
		if strings.HasSuffix(cmd, "Async") {
			return MemsetAsync, true
		}
		return MemsetSync, true
	case cmd == "waitOnEvent":
		return StreamWaitEvent, true
	}
	return RuntimeOther, true
}

// ClassifyMTIAOp names the kind of an MTIA device operation (Kineto's
// mtia_ccp_events category) from its name: "dma_request" is a copy (HTA's
// memory-kernel pattern ^dma); "event_wait" (the stream waiting for another
// stream's event) and "event_record" (a sub-microsecond marker) are
// device-side synchronisation records, not work, as CUDA's cuda_sync
// records are; everything else ("fc-dtype_Float", "pe_exe", "merge") is a
// kernel.
func ClassifyMTIAOp(name string) GPUKind {
	switch {
	case strings.HasPrefix(name, "dma"):
		return Memcpy
	case IsMTIASyncRecord(name):
		return GPUSync
	}
	return Kernel
}

// IsMTIASyncRecord reports the MTIA device operations ClassifyMTIAOp reads
// as synchronisation records. HTA counts them as operations: comparisons
// with HTA undo it.
func IsMTIASyncRecord(name string) bool {
	return name == "event_wait" || name == "event_record"
}

// ParseMTIADirection reads an MTIA DMA request's "direction" argument
// ("HOST_TO_DEVICE", "DEVICE_TO_HOST", "DEVICE_TO_DEVICE").
func ParseMTIADirection(s string) CopyKind {
	switch s {
	case "HOST_TO_DEVICE":
		return HtoD
	case "DEVICE_TO_HOST":
		return DtoH
	case "DEVICE_TO_DEVICE":
		return DtoD
	case "HOST_TO_HOST":
		return HtoH
	}
	return CopyUnknown
}

// CPUKind is what a CPU range is.
type CPUKind uint8

const (
	// Operator is an aten/framework operator (Kineto cpu_op).
	Operator CPUKind = iota
	// Annotation is a user or framework annotation (record_function, NVTX range).
	Annotation
	// Step is a ProfilerStep#N annotation: one training or inference step.
	Step
	// DataLoaderNext is the DataLoader handing out the next batch
	// ("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__").
	DataLoaderNext
	// OptimizerStep is "Optimizer.step#..." or "Optimizer.zero_grad#...".
	OptimizerStep
	// PythonFunction is a Python stack frame recorded with with_stack.
	PythonFunction
)

func (k CPUKind) String() string {
	switch k {
	case Annotation:
		return "annotation"
	case Step:
		return "step"
	case DataLoaderNext:
		return "dataloader"
	case OptimizerStep:
		return "optimizer"
	case PythonFunction:
		return "python"
	}
	return "operator"
}

// ClassifyCPU names the kind of a CPU range from its name; fallback is the
// kind its category implies.
func ClassifyCPU(name string, fallback CPUKind) CPUKind {
	switch {
	case strings.HasPrefix(name, "ProfilerStep#"):
		return Step
	case strings.HasPrefix(name, "enumerate(DataLoader)#"), strings.Contains(name, "DataLoaderIter.__next__"):
		return DataLoaderNext
	case strings.HasPrefix(name, "Optimizer.step#"), strings.HasPrefix(name, "Optimizer.zero_grad#"):
		return OptimizerStep
	}
	return fallback
}

// StepNumber returns N for "ProfilerStep#N", -1 otherwise.
func StepNumber(name string) int {
	const p = "ProfilerStep#"
	if !strings.HasPrefix(name, p) {
		return -1
	}
	n := 0
	digits := name[len(p):]
	if digits == "" {
		return -1
	}
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		if c < '0' || c > '9' {
			if i == 0 {
				return -1
			}
			break
		}
		if n > (1<<31)/10 {
			return -1
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// ParseCopyName reads the direction and memory kinds from a Kineto copy
// name: "Memcpy HtoD (Pageable -> Device)", "Memcpy DtoH (Device -> Pinned)",
// "Memset (Device)". Unknown parts stay unknown.
func ParseCopyName(name string) (dir CopyKind, src, dst MemKind) {
	rest, isCopy := strings.CutPrefix(name, "Memcpy ")
	if isCopy {
		if len(rest) >= 4 {
			switch rest[:4] {
			case "HtoD":
				dir = HtoD
			case "DtoH":
				dir = DtoH
			case "DtoD":
				dir = DtoD
			case "HtoH":
				dir = HtoH
			case "PtoP":
				dir = PtoP
			}
		}
	}
	open := strings.IndexByte(name, '(')
	close := strings.LastIndexByte(name, ')')
	if open < 0 || close < open {
		return dir, src, dst
	}
	inner := name[open+1 : close]
	if a, b, ok := strings.Cut(inner, "->"); ok {
		return dir, parseMemKind(strings.TrimSpace(a)), parseMemKind(strings.TrimSpace(b))
	}
	return dir, MemUnknown, parseMemKind(strings.TrimSpace(inner))
}

func parseMemKind(s string) MemKind {
	switch strings.ToLower(s) {
	case "pageable":
		return Pageable
	case "pinned":
		return Pinned
	case "device":
		return DeviceMem
	case "managed":
		return Managed
	case "array":
		return Array
	case "host":
		return HostMem
	}
	return MemUnknown
}

// TouchesPageable reports whether a copy reads or writes pageable host memory.
func (g *GPUOp) TouchesPageable() bool {
	return g.Kind == Memcpy && (g.Src == Pageable || g.Dst == Pageable)
}
