// Package trace is the one event model both profiler readers fill: the
// Kineto (PyTorch profiler) Chrome-trace decoder in internal/kineto and
// the Nsight Systems SQLite reader in internal/nsys. What is derived
// from it (internal/derive/tracestats) and judged of it
// (internal/judge/tracejudge) reads only this model.
//
// A Trace holds one profiled process (one rank): GPU operations (kernels,
// copies with their memory kinds, memsets, device-side synchronisation
// records) per device and stream, the CPU runtime calls that launched them
// (linked by correlation id), and the CPU operators and annotations
// (ProfilerStep#N, DataLoader __next__, Optimizer.step, aten ops) per thread.
//
// Every time is an integer number of nanoseconds on the trace's own clock.
// The records are plain, pointer-free structs held in flat slices so that a
// trace of millions of events costs tens of bytes per event and nothing for
// the garbage collector to scan.
package trace

// NameID indexes Trace.Names. Names are interned: each distinct string is
// stored once.
type NameID uint32

// Trace is one profiled process: one Kineto file or one process of an Nsight
// Systems report.
type Trace struct {
	// Source is the file the trace was read from.
	Source string
	// Format is "kineto" or "nsys".
	Format string
	Meta   Meta
	// Names is the string table every NameID indexes.
	Names []string
	// Threads are the CPU threads seen; CPUOp.Thread and RuntimeCall.Thread index it.
	Threads []Thread
	// Streams are the GPU (device, stream) queues seen; GPUOp.Stream indexes it.
	Streams []Stream
	// GPU holds kernels, copies, memsets and device-side sync records, sorted
	// by (Stream, Start) once Finish has run.
	GPU []GPUOp
	// Runtime holds CUDA/HIP runtime and driver calls, sorted by (Thread, Start).
	Runtime []RuntimeCall
	// CPU holds operators and annotations, sorted by (Thread, Start).
	CPU []CPUOp
	// Warnings are problems the reader worked around (a truncated file, NaN
	// timestamps); each names the file and, where it has one, the byte offset.
	Warnings []string
	// Counts tallies what was read and what was skipped, so nothing is lost silently.
	Counts Counts
	// Summaries, when the reader computed them itself (Nsight Systems: in
	// SQL), are used by the rules instead of recomputing from events.
	Summaries *Summaries
}

// Meta describes the profiled process.
type Meta struct {
	// Rank is the distributed rank, -1 when the trace does not say.
	Rank      int
	WorldSize int
	Backend   string
	// Devices lists the GPUs the trace describes (deviceProperties, TARGET_INFO_GPU).
	Devices []Device
	// DisplayTimeUnit is the Chrome-trace display hint ("ms", "ns"); it does
	// not change the unit of timestamps, which are microseconds in Kineto files.
	DisplayTimeUnit string
	// BaseTimeNs is Kineto's baseTimeNanoseconds (wall clock of time 0), 0 when absent.
	BaseTimeNs int64
	// SchemaVersion is the producer's schema version (Kineto schemaVersion,
	// Nsight EXPORT_SCHEMA_VERSION).
	SchemaVersion string
	// Producer names the tool version when known ("nsys 2024.6.2").
	Producer string
	// ProfiledStart and ProfiledEnd bound the recording window when the trace
	// records it (Kineto's "PyTorch Profiler (0)" span, Nsight ANALYSIS_DETAILS); 0 when unknown.
	ProfiledStart, ProfiledEnd int64
}

// Device is one GPU as the trace describes it.
type Device struct {
	ID    int
	Name  string
	SMs   int
	Bytes int64
}

// Thread is one CPU thread. PID and TID are numeric when the trace gave
// numbers; otherwise Label carries the text ("PyTorch Profiler").
type Thread struct {
	PID, TID int64
	// Label is the non-numeric pid/tid text, empty for numeric ids.
	Label string
	// Name is the thread's name when the trace records it ("pt_autograd_0").
	Name string
}

// Stream is one GPU queue.
type Stream struct {
	Device int32
	ID     int64
}

// GPUOp is one operation executed by a GPU.
type GPUOp struct {
	Start, End int64
	// Corr is the correlation id that links the op to its runtime call, 0 when none.
	Corr  int64
	Bytes int64
	Name  NameID
	// Stream indexes Trace.Streams.
	Stream uint32
	// Launch indexes Trace.Runtime: the call that enqueued this op, -1 when
	// the trace holds none. Set by Finish.
	Launch int32
	// BlocksPerSM is Kineto's "blocks per SM" for kernels, 0 when unknown.
	BlocksPerSM float32
	// AmbiguousLaunch marks an op left unlinked (Launch -1) because its
	// correlation id is not unique: which call launched it is unknown, not
	// absent. Set by Finish.
	AmbiguousLaunch bool
	Kind            GPUKind
	// Copy is the direction of a memcpy.
	Copy CopyKind
	// Src and Dst are the memory kinds of a memcpy (Dst alone for a memset).
	Src, Dst MemKind
}

// Dur is the op's duration in nanoseconds.
func (g *GPUOp) Dur() int64 { return g.End - g.Start }

// RuntimeCall is one CUDA/HIP runtime or driver API call on a CPU thread.
type RuntimeCall struct {
	Start, End int64
	Corr       int64
	Name       NameID
	Thread     uint32
	// GPU indexes Trace.GPU: the op this call enqueued, -1 when none. Set by Finish.
	GPU  int32
	Kind RuntimeKind
}

// Dur is the call's duration in nanoseconds.
func (r *RuntimeCall) Dur() int64 { return r.End - r.Start }

// CPUOp is one CPU operator or annotation range on a thread.
type CPUOp struct {
	Start, End int64
	Name       NameID
	Thread     uint32
	Kind       CPUKind
}

// Dur is the op's duration in nanoseconds.
func (c *CPUOp) Dur() int64 { return c.End - c.Start }

// Counts tallies events by fate.
type Counts struct {
	// Events is every trace event read (all phases).
	Events int64
	// Kept by kind.
	GPUOps, RuntimeCalls, CPUOps int64
	// Flow and metadata events carry nothing the model keeps (ac2g arrows,
	// fwdbwd links, thread names are read but not counted as ops).
	Flows, Metadata, Instants int64
	// Ignored are complete events of categories the model does not use
	// (python_function is kept; "Trace" spans, gpu_user_annotation are not).
	Ignored int64
	// BadTime are events dropped because ts or dur was NaN, inf, negative or
	// out of range.
	BadTime int64
	// Unlinked are GPU ops whose correlation id matches no runtime call.
	Unlinked int64
	// DuplicateCorr are runtime calls whose correlation id another call
	// already has.
	DuplicateCorr int64
	// AmbiguousCorr are GPU ops left without a launch record because their
	// correlation id is not unique: several runtime calls have it, or
	// several ops share it under a call that enqueues one. Linking them
	// would be a guess.
	AmbiguousCorr int64
	// NoPhase are events without a "ph" (Chrome-trace phase): nothing says
	// what they are, so they are skipped (and warned about).
	NoPhase int64
	// BadRows are rows of an Nsight Systems export skipped because a value
	// did not fit the schema (text where a time is, NULL where a value is
	// required).
	BadRows int64
	// Bytes is the number of (uncompressed) bytes decoded.
	Bytes int64
}

// Name returns the interned string for id, "" when out of range.
func (t *Trace) Name(id NameID) string {
	if int(id) < len(t.Names) {
		return t.Names[id]
	}
	return ""
}

// Summaries are rule totals a reader computed itself (Nsight Systems: in SQL).
type Summaries struct {
	// PageableAsyncCopies are async memcpy calls that touched pageable memory.
	PageableAsyncCopies CallSummary
	// SyncCopies are memcpy calls that block the host (no Async in the name).
	SyncCopies CallSummary
	// SyncMemsets are memset calls that block the host.
	SyncMemsets CallSummary
	// StreamSyncs, DeviceSyncs, EventSyncs are host synchronisation calls.
	StreamSyncs, DeviceSyncs, EventSyncs CallSummary
}

// CallSummary is a count and the total host time of a set of calls.
type CallSummary struct {
	Count int64
	// TotalNs is the summed duration of the calls (the host time blocked in them).
	TotalNs int64
	// MaxNs is the longest call.
	MaxNs int64
	// Bytes sums the bytes moved, where the calls move bytes.
	Bytes int64
}
