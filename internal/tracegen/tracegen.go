// Package tracegen writes synthetic Kineto (PyTorch profiler) traces whose
// GPU idle gaps have known causes, for tests of the gap attribution and for
// benchmarks at any size.
//
// It simulates one training process: a main thread that runs ProfilerStep#N
// ranges, DataLoader __next__, CPU operators that launch kernels, copies
// and synchronisations, and one GPU stream that executes what was launched
// in order. Because the generator decides what the host is doing at every
// instant, it knows exactly how much GPU idle time each host activity
// causes; that ground truth is returned next to the trace. The output looks
// like Kineto's own (one event per few lines, flow events, args), so its
// size per event is realistic.
package tracegen

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
)

// Pattern is the kind of step the generator writes: which cause its GPU
// idle gaps have.
type Pattern string

const (
	// Healthy: big kernels launched well ahead; one loss.item() sync per step.
	Healthy Pattern = "healthy"
	// DataLoader: each step waits long for the next batch.
	DataLoader Pattern = "dataloader"
	// Sync: many .item()-style synchronisations per step, each followed by
	// CPU work while the GPU is empty.
	Sync Pattern = "sync"
	// Pageable: a large input copy from pageable memory per step.
	Pageable Pattern = "pageable"
	// Launch: thousands of tiny kernels, each behind CPU operator overhead.
	Launch Pattern = "launch"
	// Mixed cycles through the patterns above, one per step.
	Mixed Pattern = "mixed"
)

// Patterns lists the single-cause patterns.
var Patterns = []Pattern{Healthy, DataLoader, Sync, Pageable, Launch}

// Config says what to generate.
type Config struct {
	Pattern Pattern
	// Steps is the number of ProfilerSteps; 0 with TargetBytes > 0 means as
	// many as fit in TargetBytes.
	Steps int
	// TargetBytes stops the trace once it reaches this size (benchmarks).
	// With Steps also set, the steps are made larger instead (each repeats
	// its pattern's work Repeat times) so that Steps steps fill about
	// TargetBytes: few long steps, as a profiler schedule records them.
	TargetBytes int64
	// Repeat runs each step's work this many times (0 means once).
	Repeat int
	// NsResolution writes timestamps with three decimals of microseconds,
	// as recent Kineto does; otherwise whole microseconds.
	NsResolution bool
	Seed         uint64
	// Rank is written in distributedInfo; -1 leaves distributedInfo out.
	Rank, WorldSize int
	// StepDelayNs delays the start of every step (a straggling rank).
	StepDelayNs int64
	// AllReduceNs, when positive, ends each step with an NCCL all-reduce
	// kernel followed by a host sync. Ranks generated with the same seed run
	// identical steps, so a rank's all-reduce ends when the slowest rank
	// (SlowestDelayNs, its StepDelayNs) has arrived plus AllReduceNs: the
	// same instant on every rank, as a blocking collective does.
	AllReduceNs    int64
	SlowestDelayNs int64
	// SetupLaunchNs, when positive, starts the second step with the first
	// launch of a kernel not seen before whose launch call takes this long
	// (module loading on first launch): the idle inside it is CauseSetup.
	SetupLaunchNs int64
}

// Cause names a host activity, as the attribution names causes.
type Cause string

const (
	CauseSync       Cause = "sync"
	CausePageable   Cause = "pageable-copy"
	CauseDataLoader Cause = "dataloader"
	CauseLaunchAPI  Cause = "launch-api"
	CauseCPUOps     Cause = "cpu-ops"
	CauseUntraced   Cause = "untraced"
	CauseLatency    Cause = "launch-latency"
	CauseSetup      Cause = "setup"
)

// Truth is what the generator knows about the trace it wrote.
type Truth struct {
	// Steps written, and events written.
	Steps  int
	Events int64
	Bytes  int64
	// IdleByCause is the GPU idle time, per host activity, inside the span
	// of the GPU work launched before the last step began (the part of the
	// trace an HTA-style analysis keeps).
	IdleByCause map[Cause]int64
	// AfterSyncNs is the part of that idle spent in gaps that began while the
	// host was blocked in a synchronisation.
	AfterSyncNs int64
	// SpanNs is that span.
	SpanNs int64
}

// IdleNs is the total idle time in Truth.
func (t *Truth) IdleNs() int64 {
	var s int64
	for _, v := range t.IdleByCause {
		s += v
	}
	return s
}

// gen is the simulation state.
type gen struct {
	cfg Config
	w   *countWriter
	bw  *bufio.Writer
	rnd *rand.Rand
	buf []byte

	host int64 // main thread clock (ns)
	gpu  int64 // time the stream becomes free (ns)
	corr int64
	ext  int64

	// Ground truth accounting for the gap being formed.
	pending   map[Cause]int64
	afterSync bool
	inStep    int
	lastStep  int
	truth     Truth
	firstGPU  int64
	lastGPU   int64 // end of the last op launched before the last step
	events    int64
	sep       bool
}

const (
	pid      = 4242
	tid      = 4242
	gpuPid   = 0
	streamID = 7
	// base is the first timestamp (us since the epoch, like Kineto's).
	baseNs = int64(1_712_195_495_000_000_000)
	// launchLatencyNs is the delay between a launch call returning and the
	// kernel starting on an idle GPU.
	launchLatencyNs = 4_000
)

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Generate writes a trace to w and returns its ground truth.
func Generate(w io.Writer, cfg Config) (Truth, error) {
	if cfg.Steps <= 0 && cfg.TargetBytes <= 0 {
		cfg.Steps = 8
	}
	if cfg.Pattern == "" {
		cfg.Pattern = Mixed
	}
	if cfg.Steps > 0 && cfg.TargetBytes > 0 && cfg.Repeat == 0 {
		cfg.Repeat = repeatFor(cfg)
	}
	cw := &countWriter{w: w}
	g := &gen{
		cfg:      cfg,
		w:        cw,
		bw:       bufio.NewWriterSize(cw, 1<<20),
		rnd:      rand.New(rand.NewPCG(cfg.Seed, 0x9e3779b97f4a7c15)),
		host:     baseNs,
		gpu:      baseNs,
		corr:     1000,
		ext:      1,
		pending:  map[Cause]int64{},
		firstGPU: -1,
	}
	g.truth.IdleByCause = map[Cause]int64{}
	g.header()
	step := 0
	for {
		if cfg.Steps > 0 && step >= cfg.Steps {
			break
		}
		if cfg.TargetBytes > 0 && cfg.Steps <= 0 && cw.n+int64(g.bw.Buffered()) >= cfg.TargetBytes {
			break
		}
		last := cfg.Steps > 0 && step == cfg.Steps-1
		g.step(step, last)
		step++
	}
	g.truth.Steps = step
	g.footer()
	if err := g.bw.Flush(); err != nil {
		return g.truth, err
	}
	g.truth.Events = g.events
	g.truth.Bytes = cw.n
	if g.firstGPU >= 0 {
		g.truth.SpanNs = g.lastGPU - g.firstGPU
	}
	return g.truth, nil
}

// repeatFor measures the size of the steps the configuration writes (on a
// dry run of up to five steps, one per pattern) and returns the repeat
// count that makes Steps steps about TargetBytes.
func repeatFor(cfg Config) int {
	dry := cfg
	dry.TargetBytes, dry.Repeat = 0, 1
	dry.Steps = min(cfg.Steps, len(Patterns))
	t, err := Generate(io.Discard, dry)
	if err != nil || t.Bytes == 0 {
		return 1
	}
	perStep := float64(t.Bytes) / float64(dry.Steps)
	return max(1, int(float64(cfg.TargetBytes)/(perStep*float64(cfg.Steps))+0.5))
}

// patternFor returns the pattern of step i.
func (g *gen) patternFor(i int) Pattern {
	if g.cfg.Pattern == Mixed {
		return Patterns[i%len(Patterns)]
	}
	return g.cfg.Pattern
}

// dur draws a duration between lo and hi nanoseconds, whole microseconds
// unless the trace has nanosecond resolution.
func (g *gen) dur(lo, hi int64) int64 {
	d := lo + g.rnd.Int64N(hi-lo+1)
	if !g.cfg.NsResolution {
		d = (d + 500) / 1000 * 1000
		if d == 0 {
			d = 1000
		}
	}
	return d
}

// hostSeg advances the host clock by d, in activity c: the GPU idle time
// inside the segment is charged to c (nothing is enqueued during it).
func (g *gen) hostSeg(c Cause, d int64) (start, end int64) {
	start, end = g.host, g.host+d
	if end > g.gpu {
		g.pending[c] += end - max(start, g.gpu)
	}
	g.host = end
	return start, end
}

// enqueue schedules a GPU op of duration d whose launch call ended at
// callEnd, closing the current gap.
func (g *gen) enqueue(callEnd, d int64) (start, end int64) {
	start = max(g.gpu, callEnd+launchLatencyNs)
	if start > g.gpu {
		g.pending[CauseLatency] += start - max(g.gpu, callEnd)
	}
	// The gap (if any) before this op closes now.
	if g.inStep < g.lastStep || g.cfg.Steps <= 0 {
		if g.firstGPU >= 0 {
			var sum int64
			for c, v := range g.pending {
				g.truth.IdleByCause[c] += v
				sum += v
			}
			if g.afterSync {
				g.truth.AfterSyncNs += sum - g.pending[CauseLatency]
			}
		}
		if g.firstGPU < 0 {
			g.firstGPU = start
		}
		g.lastGPU = start + d
	}
	clear(g.pending)
	g.afterSync = false
	g.gpu = start + d
	return start, g.gpu
}

func (g *gen) step(i int, last bool) {
	g.inStep = i
	if g.cfg.Steps > 0 {
		g.lastStep = g.cfg.Steps - 1
	} else {
		g.lastStep = 1 << 30
	}
	if g.cfg.StepDelayNs > 0 {
		g.hostSeg(CauseUntraced, g.cfg.StepDelayNs)
	}
	stepStart := g.host
	sc := g.patternFor(i)
	// Next batch.
	dl := g.dur(40_000, 80_000)
	if sc == DataLoader {
		dl = g.dur(25_000_000, 35_000_000)
	}
	a, b := g.hostSeg(CauseDataLoader, dl)
	g.annotation("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", a, b)
	g.hostSeg(CauseUntraced, g.dur(5_000, 10_000))
	if i == 1 && g.cfg.SetupLaunchNs > 0 {
		g.setupOp()
	}
	for range max(g.cfg.Repeat, 1) {
		g.work(sc)
	}
	if g.cfg.AllReduceNs > 0 {
		g.allReduce()
	}
	g.hostSeg(CauseUntraced, g.dur(5_000, 10_000))
	g.annotationStep(i, stepStart, g.host)
}

// work writes one unit of a pattern's step: its copies, operators and syncs.
func (g *gen) work(sc Pattern) {
	switch sc {
	case Healthy, DataLoader:
		g.copyIn(false, 4<<20)
		for k := range 40 {
			g.op(fmt.Sprintf("aten::linear#%d", k%8), "void gemm_kernel<float, 128, 128>(float const*, float const*, float*, int)", 10_000, 20_000, 300_000, 600_000, 2.5)
		}
		g.item()
	case Sync:
		g.copyIn(false, 4<<20)
		for range 10 {
			for k := range 5 {
				g.op(fmt.Sprintf("aten::mm#%d", k), "void gemm_kernel<float, 64, 64>(float const*, float const*, float*, int)", 10_000, 20_000, 150_000, 250_000, 1.5)
			}
			g.item()
			// Python work after reading the value: logging, metrics.
			a, b := g.hostSeg(CauseCPUOps, g.dur(800_000, 1_200_000))
			g.cpuOp("aten::add", a, b)
			g.hostSeg(CauseUntraced, g.dur(20_000, 40_000))
		}
	case Pageable:
		g.copyIn(true, 256<<20)
		for k := range 20 {
			g.op(fmt.Sprintf("aten::conv2d#%d", k%4), "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, float, float, int, float const*, float const*, bool, int, int)", 10_000, 20_000, 200_000, 300_000, 3)
		}
		g.item()
	case Launch:
		for k := range 1500 {
			g.op(fmt.Sprintf("aten::add_#%d", k%16), "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)", 12_000, 20_000, 2_000, 4_000, 0.05)
		}
		g.item()
	}
}

// op writes a CPU operator that launches one kernel: operator overhead,
// then the cudaLaunchKernel call inside the operator.
func (g *gen) op(name, kernel string, ovLo, ovHi, kLo, kHi int64, blocksPerSM float64) {
	opStart, _ := g.hostSeg(CauseCPUOps, g.dur(ovLo, ovHi))
	ls, le := g.hostSeg(CauseLaunchAPI, g.dur(5_000, 8_000))
	ks, ke := g.enqueue(le, g.dur(kLo, kHi))
	ext := g.ext
	g.ext++
	g.cpuOpExt(name, opStart, le, ext)
	corr := g.corr
	g.corr++
	g.runtime("cudaLaunchKernel", ls, le, corr, ext)
	g.kernel(kernel, ks, ke, corr, ext, blocksPerSM)
}

// setupOp writes the first launch of a kernel that needs set-up: the
// launch call itself takes SetupLaunchNs (module loading on first launch).
func (g *gen) setupOp() {
	opStart, _ := g.hostSeg(CauseCPUOps, g.dur(10_000, 20_000))
	ls, le := g.hostSeg(CauseSetup, g.cfg.SetupLaunchNs)
	ks, ke := g.enqueue(le, g.dur(50_000, 80_000))
	ext := g.ext
	g.ext++
	g.cpuOpExt("aten::first_use", opStart, le, ext)
	corr := g.corr
	g.corr++
	g.runtime("cudaLaunchKernel", ls, le, corr, ext)
	g.kernel("void first_use_kernel<float>(float*, int)", ks, ke, corr, ext, 2)
}

// copyIn writes the input copy of a step: pinned (fast, async) or pageable
// (the call holds the host while the driver stages the data).
func (g *gen) copyIn(pageable bool, bytes int64) {
	opStart, _ := g.hostSeg(CauseCPUOps, g.dur(10_000, 20_000))
	c := CauseLaunchAPI
	callDur := g.dur(8_000, 12_000)
	name := "Memcpy HtoD (Pinned -> Device)"
	if pageable {
		c = CausePageable
		callDur = g.dur(9_000_000, 11_000_000)
		name = "Memcpy HtoD (Pageable -> Device)"
	}
	ls, le := g.hostSeg(c, callDur)
	ms, me := g.enqueue(le, g.dur(300_000, 400_000))
	ext := g.ext
	g.ext++
	g.cpuOpExt("aten::copy_", opStart, le, ext)
	corr := g.corr
	g.corr++
	g.runtime("cudaMemcpyAsync", ls, le, corr, ext)
	g.memcpy(name, ms, me, corr, ext, bytes)
}

// item writes loss.item(): a small device-to-host copy and a stream sync
// that waits until the GPU has finished everything queued.
func (g *gen) item() {
	opStart, _ := g.hostSeg(CauseCPUOps, g.dur(10_000, 15_000))
	ls, le := g.hostSeg(CauseLaunchAPI, g.dur(5_000, 8_000))
	ms, me := g.enqueue(le, g.dur(2_000, 3_000))
	corr := g.corr
	g.corr++
	ext := g.ext
	g.ext++
	g.runtime("cudaMemcpyAsync", ls, le, corr, ext)
	g.memcpy("Memcpy DtoH (Device -> Pinned)", ms, me, corr, ext, 4)
	// The sync returns a few microseconds after the GPU is done.
	ss := g.host
	se := max(ss, g.gpu) + g.dur(3_000, 5_000)
	g.hostSeg(CauseSync, se-ss)
	g.afterSync = true
	corr2 := g.corr
	g.corr++
	g.runtime("cudaStreamSynchronize", ss, se, corr2, ext)
	g.cpuOpExt("aten::item", opStart, se, ext)
}

// allReduce ends the step with an all-reduce that every rank leaves at the
// same time: the rank that arrives late runs it shortest.
func (g *gen) allReduce() {
	ls, le := g.hostSeg(CauseLaunchAPI, g.dur(5_000, 8_000))
	// Everyone leaves when the slowest rank has arrived and the reduction ran.
	wait := g.cfg.SlowestDelayNs - g.cfg.StepDelayNs
	ks, ke := g.enqueue(le, wait+g.cfg.AllReduceNs)
	corr := g.corr
	g.corr++
	ext := g.ext
	g.ext++
	g.cpuOpExt("nccl:all_reduce", ls, le, ext)
	g.runtime("cudaLaunchKernel", ls, le, corr, ext)
	g.kernel("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)", ks, ke, corr, ext, 0.5)
	// The host waits for the collective (the step's loss is read after it).
	ss := g.host
	se := max(ss, g.gpu) + 3_000
	g.hostSeg(CauseSync, se-ss)
	g.afterSync = true
	corr2 := g.corr
	g.corr++
	g.runtime("cudaStreamSynchronize", ss, se, corr2, ext)
}
