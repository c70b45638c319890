// Package sim is a simulated GPU: the server of a queueing model of CUDA
// streams (gpufeed simdev), and a gpu.Source that observes it.
//
// It is a model, not an emulator: it runs no kernels, it only knows their
// durations. The stream arithmetic runs in the workload's own process, in
// the simulated driver library (internal/sim/simcuda): an operation
// starts at max(its submission time, the end of the previous operation on
// its stream[, its copy engine free]) and ends after its duration, and the
// library writes each placed operation into a ring in shared memory. The
// server reads the rings on its own clock (when an observer samples, when a
// ring fills up, when a context goes away) and keeps the device as a set of
// busy intervals in virtual time, from which it reports utilisation,
// clocks, power, PCIe traffic and processes. A fully busy simulated GPU
// costs the host almost nothing: nothing spins, nothing runs per launch.
// docs/SIMDEV.md documents the model, the protocol and every deviation from
// exactness.
package sim

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/sim/wire"
)

// pending is an operation of a stream that had not ended when last looked
// at: its end and how many operations it stands for (a graph's run of
// kernels is one record).
type pending struct {
	end int64
	n   uint64
}

// stream is one CUDA stream of one context: operations run one after the
// other.
type stream struct {
	// ends holds the outstanding operations, oldest first (non-decreasing
	// ends: the stream is serial).
	ends []pending
	// lastEnd is the end of the last operation ever recorded.
	lastEnd int64
	// retired counts the operations dropped from ends because they ended.
	retired uint64
}

// retire drops the operations that ended at or before now.
func (s *stream) retire(now int64) {
	i := sort.Search(len(s.ends), func(k int) bool { return s.ends[k].end > now })
	if i > 0 {
		for _, p := range s.ends[:i] {
			s.retired += p.n
		}
		s.ends = append(s.ends[:0], s.ends[i:]...)
	}
}

// completed counts the operations of the stream that ended at or before
// now (now no earlier than any time it was retired at).
func (s *stream) completed(now int64) uint64 {
	n := s.retired
	for _, p := range s.ends {
		if p.end > now {
			break
		}
		n += p.n
	}
	return n
}

// streamKey names a stream: its context's registration and its number.
type streamKey struct {
	reg uint64
	id  uint32
}

// process is one client process on a device: its contexts' streams and its
// share of the device's kernel time.
type process struct {
	pid     int
	conns   int // registered contexts alive
	streams map[streamKey]*stream
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

	kernels  spanSet        // when at least one kernel ran (NVML's utilisation)
	copies   spanSet        // when at least one copy ran (power model)
	link     [2]transferLog // h2d (PCIe RX), d2h (PCIe TX)
	procs    map[int]*process
	clock    clockState
	observer map[int]int64 // observer id -> start of its next window

	// horizon is the earliest time a recorded operation may start: the
	// latest moment already reported to an observer, or forgotten by
	// pruning. Starting work before it would rewrite a report already given.
	horizon int64
	pruned  int64 // last time prune ran
}

func newDevice(index int, opt Options, now int64) *device {
	return &device{
		index:    index,
		opt:      opt,
		procs:    map[int]*process{},
		clock:    clockState{t: now, mhz: float64(opt.IdleSMClockMHz)},
		observer: map[int]int64{},
		horizon:  now,
	}
}

func (d *device) process(pid int) *process {
	p := d.procs[pid]
	if p == nil {
		p = &process{pid: pid, streams: map[streamKey]*stream{}}
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

// noObserverSlack is how far back a record may land when nobody observes:
// far more than the server's reading period.
const noObserverSlack = time.Second

// Link directions, from the GPU's side: RX is host to device.
const (
	linkH2D = 0
	linkD2H = 1
)

// maxFuture bounds how far ahead of now a record may start: a full stream
// of the longest operations. Anything later is a corrupt ring.
func (d *device) maxFuture() int64 {
	return int64(d.opt.MaxPending+1) * int64(MaxOpDuration)
}

// maxPendingPerStream bounds what one stream may hold unfinished on the
// server (the library blocks at MaxPending; a graph's copies can add a
// few): more is a corrupt ring.
func (d *device) maxPendingPerStream() int { return 2*d.opt.MaxPending + 16 }

// record adds an operation a context of pid placed on its stream. The
// record comes from a client's shared memory and is checked here: a record
// that no honest library writes is refused (an error), never stored.
//
// It is placed as the library placed it, except that it never starts before
// the horizon nor before the end of its stream's previous record (a record
// that raced with an observer's sample is moved to the sample's instant, by
// microseconds at most, and the stream stays serial).
func (d *device) record(pid int, reg uint64, r wire.Record, now int64) error {
	switch {
	case r.Kind > wire.KindD2D:
		return fmt.Errorf("record of kind %d: want 0 to 3", r.Kind)
	case r.Count == 0:
		return fmt.Errorf("record of no operation")
	case r.End < r.Start:
		return fmt.Errorf("record ending (%d) before it starts (%d)", r.End, r.Start)
	case r.End-r.Start > int64(MaxOpDuration):
		return fmt.Errorf("record of %v: at most %v", time.Duration(r.End-r.Start), MaxOpDuration)
	case r.Start > now+d.maxFuture() || r.Start < 0:
		return fmt.Errorf("record starting at %d, now %d: not a time this device can reach", r.Start, now)
	case r.Bytes > MaxCopyBytes:
		return fmt.Errorf("copy of %d bytes: at most %d", r.Bytes, uint64(MaxCopyBytes))
	case r.Kind == wire.KindKernel && r.Bytes != 0:
		return fmt.Errorf("kernel record carrying %d bytes", r.Bytes)
	}
	p := d.process(pid)
	key := streamKey{reg, r.Stream}
	s := p.streams[key]
	if s == nil {
		if len(p.streams) >= MaxStreamsPerProcess {
			return fmt.Errorf("stream %d: a process may use at most %d streams", r.Stream, MaxStreamsPerProcess)
		}
		s = &stream{}
		p.streams[key] = s
	}
	s.retire(now)
	if len(s.ends) >= d.maxPendingPerStream() {
		return fmt.Errorf("stream %d holds %d unfinished operations: the library blocks at %d", r.Stream, len(s.ends), d.opt.MaxPending)
	}
	dur := r.End - r.Start
	start := max(r.Start, d.horizon, s.lastEnd)
	end := start + dur
	s.lastEnd = end
	s.ends = append(s.ends, pending{end: end, n: uint64(r.Count)})
	switch r.Kind {
	case wire.KindKernel:
		d.kernels.add(start, end)
		p.kernels.add(start, end)
	case wire.KindH2D, wire.KindD2H:
		d.copies.add(start, end)
		d.link[int(r.Kind-wire.KindH2D)].add(start, end, r.Bytes)
	case wire.KindD2D:
		d.copies.add(start, end)
	}
	if now-d.pruned > int64(100*time.Millisecond) {
		d.prune(now)
	}
	return nil
}

// forget drops a context's streams once they hold nothing unfinished,
// keeping their completed count (its registration ended).
func (d *device) forget(pid int, reg uint64, now int64) {
	p := d.procs[pid]
	if p == nil {
		return
	}
	for key, s := range p.streams {
		if key.reg != reg {
			continue
		}
		s.retire(now)
		if len(s.ends) == 0 {
			p.retired += s.retired
			delete(p.streams, key)
		}
	}
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
		for key, s := range p.streams {
			s.retire(cut)
			if len(s.ends) == 0 && s.lastEnd <= cut && p.conns == 0 {
				p.retired += s.retired
				delete(p.streams, key)
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
		s.PCIeRxBytesPerSec = f64(d.link[linkH2D].bytesIn(from, now) / secs)
		s.PCIeTxBytesPerSec = f64(d.link[linkD2H].bytesIn(from, now) / secs)
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
