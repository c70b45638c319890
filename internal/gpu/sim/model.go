// Package sim is a simulated GPU: a queueing model of CUDA streams served on a
// Unix socket, and a gpu.Source that observes it.
//
// It is a model, not an emulator: it runs no kernels, it only knows their
// durations. It is exact about time: an operation starts at max(its
// submission time, the end of the previous operation on its stream) and ends
// after its duration; a synchronisation returns once the last end time has
// passed. The device is a set of busy intervals in virtual time, so a fully
// busy simulated GPU costs the host almost nothing: no goroutine spins, timers
// fire only where a client waits. docs/SIMDEV.md documents the model, the
// wire protocol and every deviation from exactness.
package sim

import (
	"math"
	"sort"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/gpu/sim/wire"
)

// opKind says what an operation is.
type opKind uint8

const (
	opKernel opKind = iota
	opCopy
)

// op is one operation submitted to a stream.
type op struct {
	kind   opKind
	dur    int64 // kernel duration in ns (copies: computed from bytes)
	bytes  uint64
	dir    uint8 // wire.CopyH2D / CopyD2H / CopyD2D
	pinned bool
}

// stream is one CUDA stream of one process: operations run one after the
// other, and at most maxPending of them may be outstanding.
type stream struct {
	// ends holds the end times of the outstanding operations, oldest first
	// (non-decreasing: the stream is serial).
	ends []int64
	// lastEnd is the end of the last operation ever submitted.
	lastEnd int64
	// retired counts the operations dropped from ends because they ended.
	retired uint64
}

// retire drops the operations that ended at or before now.
func (s *stream) retire(now int64) {
	i := sort.Search(len(s.ends), func(k int) bool { return s.ends[k] > now })
	if i > 0 {
		s.ends = append(s.ends[:0], s.ends[i:]...)
		s.retired += uint64(i)
	}
}

// completed counts the operations of the stream that ended at or before
// now (now no earlier than any time it was retired at).
func (s *stream) completed(now int64) uint64 {
	return s.retired + uint64(sort.Search(len(s.ends), func(k int) bool { return s.ends[k] > now }))
}

// process is one client process's CUDA context on a device: its streams and
// its share of the device's kernel time.
type process struct {
	pid     int
	conns   int
	streams map[uint32]*stream
	kernels spanSet
	// retired counts the completed operations of streams forgotten since.
	retired uint64
}

// completed counts the process's operations (kernels and copies) that ended
// at or before now, since it first used the device.
func (p *process) completed(now int64) uint64 {
	n := p.retired
	for _, s := range p.streams {
		n += s.completed(now)
	}
	return n
}

// lastEnd returns the end of the process's last operation on any stream.
func (p *process) lastEnd() int64 {
	var e int64
	for _, s := range p.streams {
		e = max(e, s.lastEnd)
	}
	return e
}

// clockState is the SM clock model's state at time t.
type clockState struct {
	t   int64
	mhz float64
}

// device is the model of one GPU. It does no locking and reads no clock:
// every method takes the current time, so tests drive it in virtual time.
// The server holds a mutex around it.
type device struct {
	index int
	opt   Options
	bw    [3]float64 // pinned bytes/s per direction

	kernels  spanSet        // when at least one kernel ran (NVML's utilisation)
	copies   spanSet        // when at least one copy ran (power model)
	link     [2]transferLog // h2d (PCIe RX), d2h (PCIe TX)
	engine   [2]int64       // when each direction's copy engine is next free
	procs    map[int]*process
	clock    clockState
	observer map[int]int64 // observer id -> start of its next window

	// horizon is the earliest time a new operation may start: the latest
	// moment already reported to an observer, or forgotten by pruning.
	// Starting work before it would rewrite a report already given.
	horizon int64
	pruned  int64 // last time prune ran
}

func newDevice(index int, opt Options, now int64) *device {
	return &device{
		index:    index,
		opt:      opt,
		bw:       opt.pinnedBandwidth(),
		procs:    map[int]*process{},
		clock:    clockState{t: now, mhz: float64(opt.IdleSMClockMHz)},
		observer: map[int]int64{},
		horizon:  now,
	}
}

func (d *device) process(pid int) *process {
	p := d.procs[pid]
	if p == nil {
		p = &process{pid: pid, streams: map[uint32]*stream{}}
		d.procs[pid] = p
	}
	return p
}

// attach and detach count a process's open connections.
func (d *device) attach(pid int) { d.process(pid).conns++ }

func (d *device) detach(pid int) {
	if p := d.procs[pid]; p != nil && p.conns > 0 {
		p.conns--
	}
}

// duration returns how long op takes.
func (d *device) duration(o op) int64 {
	if o.kind == opKernel {
		return o.dur
	}
	bw := d.bw[o.dir]
	if !o.pinned && o.dir != wire.CopyD2D {
		bw *= d.opt.PageableFactor
	}
	ns := math.Ceil(float64(o.bytes) / bw * 1e9)
	return int64(min(ns, float64(MaxOpDuration)))
}

// submitTime clamps a client's timestamp: never in the future, never before
// what observers were already told (the horizon wins).
func (d *device) submitTime(ts, now int64) int64 {
	return max(min(ts, now), d.horizon)
}

// noObserverSlack is how far back a submission may land when nobody
// observes: far more than any socket delay.
const noObserverSlack = time.Second

// roomAt returns when stream s of pid will accept another operation: 0 when
// it has room at now, else the end of the operation whose completion frees
// a slot.
func (d *device) roomAt(pid int, sid uint32, now int64) int64 {
	p := d.procs[pid]
	if p == nil {
		return 0
	}
	s := p.streams[sid]
	if s == nil {
		return 0
	}
	s.retire(now)
	if len(s.ends) < d.opt.MaxPending {
		return 0
	}
	return s.ends[len(s.ends)-d.opt.MaxPending]
}

// canAddStream says whether pid may use stream sid (an existing stream, or a
// new one within MaxStreamsPerProcess).
func (d *device) canAddStream(pid int, sid uint32) bool {
	p := d.process(pid)
	if _, ok := p.streams[sid]; ok {
		return true
	}
	return len(p.streams) < MaxStreamsPerProcess
}

// submit enqueues o on stream sid of pid, submitted at sub (already clamped
// and, when the stream was full, no earlier than the moment it had room),
// and returns when it starts and ends. The caller checks roomAt first.
func (d *device) submit(pid int, sid uint32, o op, sub int64) (start, end int64) {
	p := d.process(pid)
	s := p.streams[sid]
	if s == nil {
		s = &stream{}
		p.streams[sid] = s
	}
	start = max(sub, s.lastEnd)
	if o.kind == opCopy && o.dir != wire.CopyD2D {
		// One copy engine per direction: copies in one direction share the
		// link one after the other, whichever stream they come from.
		start = max(start, d.engine[o.dir])
	}
	end = start + d.duration(o)
	s.lastEnd = end
	s.ends = append(s.ends, end)
	switch o.kind {
	case opKernel:
		d.kernels.add(start, end)
		p.kernels.add(start, end)
	case opCopy:
		d.copies.add(start, end)
		if o.dir != wire.CopyD2D {
			d.engine[o.dir] = end
			d.link[o.dir].add(start, end, o.bytes)
		}
	}
	if sub-d.pruned > int64(100*time.Millisecond) {
		d.prune(sub)
	}
	return start, end
}

// syncTarget returns the time a synchronisation of stream sid (or, when
// whole, of every stream of the process) returns at.
func (d *device) syncTarget(pid int, sid uint32, whole bool) int64 {
	p := d.procs[pid]
	if p == nil {
		return 0
	}
	if whole {
		return p.lastEnd()
	}
	if s := p.streams[sid]; s != nil {
		return s.lastEnd
	}
	return 0
}

// addObserver starts an observer's first window at now.
func (d *device) addObserver(id int, now int64) { d.observer[id] = now }

func (d *device) removeObserver(id int) { delete(d.observer, id) }

// prune forgets what no observer can still ask about: before the oldest
// observer window (less one point window, which a point may straddle), and
// never more than Retention ago. With no observer one second of slack is kept
// so that a message delayed in the socket still lands at its own timestamp
// (with observers, the horizon already bounds how far back work may land).
func (d *device) prune(now int64) {
	d.pruned = now
	cut := now - int64(noObserverSlack)
	if len(d.observer) > 0 {
		cut = now
		for _, c := range d.observer {
			cut = min(cut, c-int64(d.opt.PointWindow))
		}
	}
	cut = max(cut, now-int64(d.opt.Retention))
	if cut <= d.clock.t {
		return
	}
	d.clock = d.clockAt(cut)
	d.horizon = max(d.horizon, cut)
	d.kernels.pruneBefore(cut)
	d.copies.pruneBefore(cut)
	d.link[0].pruneBefore(cut)
	d.link[1].pruneBefore(cut)
	for pid, p := range d.procs {
		p.kernels.pruneBefore(cut)
		for sid, s := range p.streams {
			s.retire(cut)
			if len(s.ends) == 0 && s.lastEnd <= cut && p.conns == 0 {
				p.retired += s.retired
				delete(p.streams, sid)
			}
		}
		if p.conns == 0 && len(p.streams) == 0 && len(p.kernels.s) == 0 {
			delete(d.procs, pid)
		}
	}
}

// clockAt runs the SM clock model from its state up to t: a first-order lag
// toward the maximum clock while at least one kernel runs and toward the
// idle clock otherwise.
func (d *device) clockAt(t int64) clockState {
	c := d.clock
	if t <= c.t {
		return c
	}
	hi, lo := float64(d.opt.MaxSMClockMHz), float64(d.opt.IdleSMClockMHz)
	rise, fall := float64(d.opt.ClockRiseTau), float64(d.opt.ClockFallTau)
	step := func(until int64, target, tau float64) {
		if until <= c.t {
			return
		}
		c.mhz = target + (c.mhz-target)*math.Exp(-float64(until-c.t)/tau)
		c.t = until
	}
	d.kernels.each(c.t, t, func(s, e int64) {
		step(s, lo, fall)
		step(e, hi, rise)
	})
	step(t, lo, fall)
	return c
}

// info returns the device's static facts.
func (d *device) info() gpu.DeviceInfo {
	o := d.opt
	u32 := func(v uint32) *uint32 { return &v }
	f64 := func(v float64) *float64 { return &v }
	gen, width := o.LinkGen, o.LinkWidth
	mem := o.MemTotalBytes
	return gpu.DeviceInfo{
		Index:              d.index,
		UUID:               simUUID(d.index),
		Name:               o.Name,
		Simulated:          true,
		Driver:             "gpufeed simdev protocol " + itoa(wire.Version),
		MemTotalBytes:      &mem,
		MaxSMClockMHz:      u32(o.MaxSMClockMHz),
		MaxMemClockMHz:     u32(o.MemClockMHz),
		AppSMClockMHz:      u32(o.MaxSMClockMHz),
		AppMemClockMHz:     u32(o.MemClockMHz),
		PowerLimitW:        f64(o.PowerLimitW),
		DefaultPowerLimitW: f64(o.PowerLimitW),
		LinkGenMax:         &gen,
		LinkWidthMax:       &width,
		Unsupported:        []string{"persistence_mode", "numa_node", "ecc_enabled", "remapped_rows", "retired_pages", "gpm"},
	}
}

// sampleUnsupported names the readings the model does not produce.
var sampleUnsupported = []string{"mem_util_percent", "temp_c", "mem_used_bytes", "gpm"}

// sample reports the window from observer id's previous sample (or its
// arrival) to now, and starts its next window at now.
func (d *device) sample(id int, now int64) gpu.Sample {
	from, ok := d.observer[id]
	if !ok {
		from = now
	}
	from = max(from, now-int64(d.opt.Retention))
	d.observer[id] = now
	d.horizon = max(d.horizon, now)
	s := d.measure(from, now)
	if now-d.pruned > int64(100*time.Millisecond) {
		d.prune(now)
	}
	return s
}

// measure reports the window [from, now) without changing any state.
func (d *device) measure(from, now int64) gpu.Sample {
	s := gpu.Sample{
		Index:       d.index,
		At:          wire.Wall(now),
		Points:      d.points(from, now),
		Unsupported: append([]string(nil), sampleUnsupported...),
	}
	f64 := func(v float64) *float64 { return &v }
	window := now - from
	busy := d.kernels.busy(from, now)
	var util, copyFrac float64
	if window > 0 {
		util = float64(busy) / float64(window)
		copyFrac = float64(d.copies.busy(from, now)) / float64(window)
		s.UtilPercent = f64(100 * util)
		secs := float64(window) / 1e9
		s.PCIeRxBytesPerSec = f64(d.link[wire.CopyH2D].bytesIn(from, now) / secs)
		s.PCIeTxBytesPerSec = f64(d.link[wire.CopyD2H].bytesIn(from, now) / secs)
	}
	clk := d.clockAt(now)
	sm := uint32(math.Round(clk.mhz))
	mem := d.opt.MemClockMHz
	s.SMClockMHz, s.MemClockMHz = &sm, &mem
	var reasons uint64
	if !d.kernels.covers(now) {
		reasons |= clocksEventReasonGPUIdle
	}
	s.ClockEventReasons = &reasons
	// Power follows activity: idle draw, plus the active draw scaled by the
	// share of the window with a kernel running and by the clock (dynamic
	// power rises with frequency), plus a small draw while copies run.
	ratio := clk.mhz / float64(d.opt.MaxSMClockMHz)
	power := d.opt.IdlePowerW + (d.opt.ActivePowerW-d.opt.IdlePowerW)*util*ratio + d.opt.CopyPowerW*copyFrac
	s.PowerW = f64(min(power, d.opt.PowerLimitW))
	gen, width := d.opt.LinkGen, d.opt.LinkWidth
	s.LinkGen, s.LinkWidth = &gen, &width
	var replays uint64 // a simulated link never replays a packet
	s.ReplayCounter = &replays
	s.Processes = d.processes(from, now)
	return s
}

// clocksEventReasonGPUIdle is NVML's nvmlClocksEventReasonGpuIdle: nothing
// runs and the clocks are dropping toward idle.
const clocksEventReasonGPUIdle = 0x1

// maxPointsPerSample bounds the points one sample carries (the last ones are
// kept): a minute of 20 ms points.
const maxPointsPerSample = 3000

// points returns the fine-grained utilisation of each point window that ended
// in (from, now], on a grid of PointWindow multiples of CLOCK_MONOTONIC.
func (d *device) points(from, now int64) []gpu.UtilPoint {
	pw := int64(d.opt.PointWindow)
	first := (from/pw + 1) * pw
	if first > now {
		return nil
	}
	n := (now-first)/pw + 1
	if n > maxPointsPerSample {
		first += (n - maxPointsPerSample) * pw
		n = maxPointsPerSample
	}
	pts := make([]gpu.UtilPoint, 0, n)
	for g := first; g <= now; g += pw {
		pts = append(pts, gpu.UtilPoint{
			At:      wire.Wall(g),
			Percent: 100 * float64(d.kernels.busy(g-pw, g)) / float64(pw),
		})
	}
	return pts
}

// processes reports each process connected now or with kernel time in the window.
func (d *device) processes(from, now int64) []gpu.Process {
	var out []gpu.Process
	window := now - from
	for _, p := range d.procs {
		busy := p.kernels.busy(from, now)
		if p.conns == 0 && busy == 0 {
			continue
		}
		done := p.completed(now)
		pr := gpu.Process{PID: p.pid, CompletedOps: &done}
		if window > 0 {
			v := 100 * float64(busy) / float64(window)
			pr.SMUtilPercent = &v
		}
		out = append(out, pr)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}
