package derive

import (
	"math"
	"slices"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Host is the machine's derived series.
type Host struct {
	NumCPU int
	// CPUs by CPU number.
	CPUs []*CPU
	// BusyPct and IOWaitPct average all CPUs, per interval.
	BusyPct   Series
	IOWaitPct Series
	Busy      Stats
	// Busiest lists CPU numbers by mean busy share, busiest first.
	Busiest []int
	// ProcsRunning is runnable tasks per tick (/proc/stat procs_running,
	// host-wide, including gpufeed itself); ProcsBlocked those in D state.
	ProcsRunning Gauge
	ProcsBlocked Gauge
	RunQueue     Stats
	// RunQueuePerCPU is procs_running over NumCPU per tick: above 1 means
	// runnable tasks outnumber cores.
	RunQueuePerCPU Gauge
	CtxtPerSec     Series

	// PSI: the share of time (percent) some/all tasks stalled on the resource,
	// per interval (slow tier spread); nil when /proc/pressure is absent.
	PSI *PSI

	MemAvailable Gauge // bytes, slow tier
	MemTotal     float64
	Dirty        Gauge
	Writeback    Gauge

	Disks []*Disk
}

// CPU is one CPU's shares per interval, in percent.
type CPU struct {
	CPU       int
	BusyPct   Series // everything but idle and iowait
	UserPct   Series // user + nice
	SystemPct Series
	IOWaitPct Series
	IRQPct    Series // irq + softirq
	StealPct  Series
	Busy      Stats
}

// PSI holds stall shares per interval, in percent.
type PSI struct {
	CPUSome, MemSome, MemFull, IOSome, IOFull Series
}

// Disk is one block device's rates per interval (slow tier spread).
type Disk struct {
	Name          string
	ReadsPerSec   Series
	ReadKBPerSec  Series
	WritesPerSec  Series
	WriteKBPerSec Series
	// AwaitMS is the mean time per completed I/O (read+write ms over ios).
	AwaitMS Series
	// UtilPct is the share of time the device had I/O in flight (io_ticks).
	UtilPct Series
	// Window-level values (first to last reading).
	Reads, ReadKB, Writes, WriteKB, Await, Util float64
}

func (a *View) buildHost() {
	tl := a.Timeline
	n, nt := len(a.Intervals), len(tl.Ticks)
	have := false
	for _, tk := range tl.Ticks {
		if tk.Host != nil {
			have = true
			break
		}
	}
	if !have {
		return
	}
	h := &Host{NumCPU: tl.Meta.NumCPU, BusyPct: nanSeries(n), IOWaitPct: nanSeries(n)}
	h.ProcsRunning, h.ProcsBlocked, h.RunQueuePerCPU = nanGauge(nt), nanGauge(nt), nanGauge(nt)
	h.MemAvailable, h.Dirty, h.Writeback = nanGauge(nt), nanGauge(nt), nanGauge(nt)
	h.MemTotal = math.NaN()
	cpus := map[int]*CPU{}
	getCPU := func(c int) *CPU {
		if x, ok := cpus[c]; ok {
			return x
		}
		x := &CPU{CPU: c, BusyPct: nanSeries(n), UserPct: nanSeries(n), SystemPct: nanSeries(n),
			IOWaitPct: nanSeries(n), IRQPct: nanSeries(n), StealPct: nanSeries(n)}
		cpus[c] = x
		return x
	}
	var ctxIdx, psiIdx []int
	var ctxt []float64
	var psi [5][]float64
	type diskAcc struct {
		idx                                         []int
		reads, rsect, writes, wsect, ms, ios, ticks []float64
	}
	disks := map[string]*diskAcc{}
	var diskOrder []string
	for i, tk := range tl.Ticks {
		hs := tk.Host
		if hs == nil {
			continue
		}
		h.ProcsRunning[i] = float64(hs.ProcsRunning)
		h.ProcsBlocked[i] = float64(hs.ProcsBlocked)
		if h.NumCPU > 0 {
			h.RunQueuePerCPU[i] = float64(hs.ProcsRunning) / float64(h.NumCPU)
		}
		ctxIdx = append(ctxIdx, i)
		ctxt = append(ctxt, float64(hs.Ctxt))
		if hs.PSI != nil {
			psiIdx = append(psiIdx, i)
			for k, v := range []uint64{hs.PSI.CPUSomeUS, hs.PSI.MemSomeUS, hs.PSI.MemFullUS, hs.PSI.IOSomeUS, hs.PSI.IOFullUS} {
				psi[k] = append(psi[k], float64(v))
			}
		}
		if hs.Mem != nil {
			h.MemAvailable[i] = float64(hs.Mem.Available)
			h.Dirty[i] = float64(hs.Mem.Dirty)
			h.Writeback[i] = float64(hs.Mem.Writeback)
			h.MemTotal = float64(hs.Mem.Total)
		}
		for _, d := range hs.Disks {
			acc := disks[d.Name]
			if acc == nil {
				acc = &diskAcc{}
				disks[d.Name] = acc
				diskOrder = append(diskOrder, d.Name)
			}
			acc.idx = append(acc.idx, i)
			acc.reads = append(acc.reads, float64(d.Reads))
			acc.rsect = append(acc.rsect, float64(d.SectorsRead))
			acc.writes = append(acc.writes, float64(d.Writes))
			acc.wsect = append(acc.wsect, float64(d.SectorsWrite))
			acc.ms = append(acc.ms, float64(d.ReadMS+d.WriteMS))
			acc.ios = append(acc.ios, float64(d.Reads+d.Writes))
			acc.ticks = append(acc.ticks, float64(d.IOTicksMS))
		}
		if i+1 >= nt || tl.Ticks[i+1].Host == nil {
			continue
		}
		next := tl.Ticks[i+1].Host
		var allBusy, allTotal, allIO float64
		for _, c := range hs.CPUs {
			nc, ok := findCPU(next.CPUs, c.CPU)
			if !ok {
				continue
			}
			d := diffCPU(c, nc)
			total := d.User + d.Nice + d.System + d.Idle + d.IOWait + d.IRQ + d.SoftIRQ + d.Steal
			if total <= 0 {
				continue
			}
			x := getCPU(c.CPU)
			busy := total - d.Idle - d.IOWait
			x.BusyPct[i] = busy / total * 100
			x.UserPct[i] = (d.User + d.Nice) / total * 100
			x.SystemPct[i] = d.System / total * 100
			x.IOWaitPct[i] = d.IOWait / total * 100
			x.IRQPct[i] = (d.IRQ + d.SoftIRQ) / total * 100
			x.StealPct[i] = d.Steal / total * 100
			allBusy += busy
			allTotal += total
			allIO += d.IOWait
		}
		if allTotal > 0 {
			h.BusyPct[i] = allBusy / allTotal * 100
			h.IOWaitPct[i] = allIO / allTotal * 100
		}
	}
	for _, c := range cpus {
		c.Busy = c.BusyPct.Stats()
		h.CPUs = append(h.CPUs, c)
	}
	slices.SortFunc(h.CPUs, func(x, y *CPU) int { return x.CPU - y.CPU })
	for _, c := range h.CPUs {
		h.Busiest = append(h.Busiest, c.CPU)
	}
	slices.SortStableFunc(h.Busiest, func(x, y int) int {
		bx, by := cpus[x].Busy.Mean, cpus[y].Busy.Mean
		switch {
		case bx > by || (!math.IsNaN(bx) && math.IsNaN(by)):
			return -1
		case bx < by || (math.IsNaN(bx) && !math.IsNaN(by)):
			return 1
		}
		return 0
	})
	h.Busy = h.BusyPct.Stats()
	h.RunQueue = h.ProcsRunning.Stats()
	h.CtxtPerSec = rateSeries(n, a.TickT, ctxIdx, ctxt, 1)
	if len(psiIdx) > 0 {
		// total= is in microseconds: rate (us/s) / 1e6 * 100 = percent of time.
		const usToPct = 100.0 / 1e6
		h.PSI = &PSI{
			CPUSome: rateSeries(n, a.TickT, psiIdx, psi[0], usToPct),
			MemSome: rateSeries(n, a.TickT, psiIdx, psi[1], usToPct),
			MemFull: rateSeries(n, a.TickT, psiIdx, psi[2], usToPct),
			IOSome:  rateSeries(n, a.TickT, psiIdx, psi[3], usToPct),
			IOFull:  rateSeries(n, a.TickT, psiIdx, psi[4], usToPct),
		}
	}
	for _, name := range diskOrder {
		acc := disks[name]
		// Sectors are 512 bytes in diskstats whatever the device's sector size.
		const sectorKB = 0.5
		d := &Disk{Name: name,
			ReadsPerSec:   rateSeries(n, a.TickT, acc.idx, acc.reads, 1),
			ReadKBPerSec:  rateSeries(n, a.TickT, acc.idx, acc.rsect, sectorKB),
			WritesPerSec:  rateSeries(n, a.TickT, acc.idx, acc.writes, 1),
			WriteKBPerSec: rateSeries(n, a.TickT, acc.idx, acc.wsect, sectorKB),
			UtilPct:       rateSeries(n, a.TickT, acc.idx, acc.ticks, 100.0/1000),
			AwaitMS:       ratioSeries(n, acc.idx, acc.ms, acc.ios),
		}
		d.Reads, d.ReadKB, d.Writes, d.WriteKB, d.Util, d.Await = math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN()
		if k := len(acc.idx); k >= 2 {
			dt := float64(a.TickT[acc.idx[k-1]]-a.TickT[acc.idx[0]]) / 1e9
			if dt > 0 {
				d.Reads = (acc.reads[k-1] - acc.reads[0]) / dt
				d.ReadKB = (acc.rsect[k-1] - acc.rsect[0]) * sectorKB / dt
				d.Writes = (acc.writes[k-1] - acc.writes[0]) / dt
				d.WriteKB = (acc.wsect[k-1] - acc.wsect[0]) * sectorKB / dt
				d.Util = (acc.ticks[k-1] - acc.ticks[0]) / 1000 / dt * 100
			}
			if dios := acc.ios[k-1] - acc.ios[0]; dios > 0 {
				d.Await = (acc.ms[k-1] - acc.ms[0]) / dios
			}
		}
		h.Disks = append(h.Disks, d)
	}
	a.Host = h
}

// ratioSeries spreads Δnum/Δden between consecutive readings (await = Δms/Δios).
func ratioSeries(n int, idx []int, num, den []float64) Series {
	s := nanSeries(n)
	for k := 1; k < len(idx); k++ {
		dd := den[k] - den[k-1]
		if dd <= 0 {
			continue
		}
		r := (num[k] - num[k-1]) / dd
		for i := idx[k-1]; i < idx[k] && i < n; i++ {
			s[i] = r
		}
	}
	return s
}

func findCPU(cs []timeline.CPUTimes, n int) (timeline.CPUTimes, bool) {
	if n < len(cs) && cs[n].CPU == n {
		return cs[n], true
	}
	for _, c := range cs {
		if c.CPU == n {
			return c, true
		}
	}
	return timeline.CPUTimes{}, false
}

type cpuDelta struct{ User, Nice, System, Idle, IOWait, IRQ, SoftIRQ, Steal float64 }

// diffCPU subtracts counters; a counter that went backwards (CPU hotplug,
// iowait's known non-monotonicity) contributes 0.
func diffCPU(a, b timeline.CPUTimes) cpuDelta {
	d := func(x, y uint64) float64 {
		if y < x {
			return 0
		}
		return float64(y - x)
	}
	return cpuDelta{d(a.User, b.User), d(a.Nice, b.Nice), d(a.System, b.System), d(a.Idle, b.Idle),
		d(a.IOWait, b.IOWait), d(a.IRQ, b.IRQ), d(a.SoftIRQ, b.SoftIRQ), d(a.Steal, b.Steal)}
}
