package derive

import (
	"math"
	"slices"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Proc is one process's derived series.
type Proc struct {
	Key     timeline.ProcKey
	Info    *timeline.ProcInfo
	Role    string
	Threads []*Thread // by TID

	// CPUPct is the sum of its threads' CPU per interval (percent of one core; may exceed 100).
	CPUPct Series
	CPU    Stats

	// Per tick, NaN where not read: resident set (statm), proportional and
	// unique set sizes (smaps_rollup, rollup tier), open descriptors (slow tier).
	RSSBytes    Gauge
	PSSBytes    Gauge
	USSBytes    Gauge
	FDs         Gauge
	ThreadCount Gauge // threads per tick

	// Growth rates per second (least squares over the readings); NaN with fewer than two.
	RSSGrowth, PSSGrowth, USSGrowth, FDGrowth float64

	// NoFileSoft is RLIMIT_NOFILE's soft limit (nil when not visible; timeline.Unlimited when unlimited).
	NoFileSoft *uint64

	// Read rates over the window, from /proc/PID/io (first to last reading):
	// bytes read through read-like calls (rchar), bytes fetched from storage
	// (read_bytes), read calls per second, and the mean bytes per read call.
	// NaN when io was not visible or read fewer than twice.
	RCharPerSec     float64
	ReadBytesPerSec float64
	ReadCallsPerSec float64
	MeanReadBytes   float64
	// ReadBytesPerSecSeries is read_bytes per second per interval (slow tier spread).
	ReadBytesPerSecSeries Series
	RCharPerSecSeries     Series

	idx []int32
	tl  *timeline.Timeline
}

// Sample returns the process's raw sample at tick i (nil when absent).
func (p *Proc) Sample(i int) *timeline.ProcSample {
	if i < 0 || i >= len(p.idx) || p.idx[i] < 0 {
		return nil
	}
	return &p.tl.Ticks[i].Procs[p.idx[i]]
}

// Rank is the process's rank from its allowlisted environment (RANK, then
// SLURM_PROCID), "" when none, or when its role says it is not a rank (a
// rank's forked DataLoader worker inherits its environment).
func (p *Proc) Rank() string {
	if p.Info == nil || (p.Info.Role != "" && p.Info.Role != "rank") {
		return ""
	}
	if r := p.Info.Env["RANK"]; r != "" {
		return r
	}
	return p.Info.Env["SLURM_PROCID"]
}

func (a *View) buildProcs() {
	tl := a.Timeline
	var res keyResolver[timeline.ProcKey]
	for k, info := range tl.Procs {
		res.add(k.PID, k, info.FirstSeen, info.LastSeen)
		p := &Proc{Key: k, Info: info, Role: info.Role, NoFileSoft: info.NoFileSoft, tl: tl}
		p.idx = make([]int32, len(tl.Ticks))
		for i := range p.idx {
			p.idx[i] = -1
		}
		a.procByKey[k] = p
		a.Procs = append(a.Procs, p)
	}
	for i, tk := range tl.Ticks {
		for j, ps := range tk.Procs {
			k, ok := res.at(ps.PID, tk.T)
			if !ok {
				k = timeline.ProcKey{PID: ps.PID}
				info := &timeline.ProcInfo{Key: k, FirstSeen: tk.T, LastSeen: tk.T}
				res.add(ps.PID, k, math.MinInt64, math.MaxInt64)
				p := &Proc{Key: k, Info: info, tl: tl, idx: make([]int32, len(tl.Ticks))}
				for x := range p.idx {
					p.idx[x] = -1
				}
				a.procByKey[k] = p
				a.Procs = append(a.Procs, p)
			}
			a.procByKey[k].idx[i] = int32(j)
		}
	}
	slices.SortFunc(a.Procs, func(x, y *Proc) int {
		if x.Key.PID != y.Key.PID {
			return x.Key.PID - y.Key.PID
		}
		return int(x.Key.StartTime) - int(y.Key.StartTime)
	})
	// Threads belong to the process with their PID alive when they were first seen.
	for _, th := range a.Threads {
		if k, ok := res.at(th.PID, th.Info.FirstSeen); ok {
			p := a.procByKey[k]
			p.Threads = append(p.Threads, th)
		}
	}
	n := len(a.Intervals)
	nt := len(tl.Ticks)
	page := float64(tl.Meta.PageSize)
	if page <= 0 {
		page = 4096
	}
	for _, p := range a.Procs {
		p.CPUPct = nanSeries(n)
		for _, th := range p.Threads {
			p.CPUPct = p.CPUPct.Add(th.CPUPct)
		}
		p.CPU = p.CPUPct.Stats()
		p.RSSBytes, p.PSSBytes, p.USSBytes, p.FDs, p.ThreadCount = nanGauge(nt), nanGauge(nt), nanGauge(nt), nanGauge(nt), nanGauge(nt)
		var ioIdx []int
		var rchar, rbytes, syscr []float64
		for i := range tl.Ticks {
			s := p.Sample(i)
			if s == nil {
				continue
			}
			p.RSSBytes[i] = float64(s.RSSPages) * page
			p.ThreadCount[i] = float64(s.Threads)
			if s.PSSBytes != nil {
				p.PSSBytes[i] = float64(*s.PSSBytes)
			}
			if s.USSBytes != nil {
				p.USSBytes[i] = float64(*s.USSBytes)
			}
			if s.FDs != nil {
				p.FDs[i] = float64(*s.FDs)
			}
			if s.IO != nil {
				ioIdx = append(ioIdx, i)
				rchar = append(rchar, float64(s.IO.RChar))
				rbytes = append(rbytes, float64(s.IO.ReadBytes))
				syscr = append(syscr, float64(s.IO.SyscR))
			}
		}
		p.RSSGrowth, p.PSSGrowth = p.RSSBytes.Slope(a.TickT), p.PSSBytes.Slope(a.TickT)
		p.USSGrowth, p.FDGrowth = p.USSBytes.Slope(a.TickT), p.FDs.Slope(a.TickT)
		p.RCharPerSec, p.ReadBytesPerSec, p.ReadCallsPerSec, p.MeanReadBytes = math.NaN(), math.NaN(), math.NaN(), math.NaN()
		p.ReadBytesPerSecSeries = rateSeries(n, a.TickT, ioIdx, rbytes, 1)
		p.RCharPerSecSeries = rateSeries(n, a.TickT, ioIdx, rchar, 1)
		if k := len(ioIdx); k >= 2 {
			dt := float64(a.TickT[ioIdx[k-1]]-a.TickT[ioIdx[0]]) / 1e9
			if dt > 0 {
				dr, db, dc := rchar[k-1]-rchar[0], rbytes[k-1]-rbytes[0], syscr[k-1]-syscr[0]
				p.RCharPerSec, p.ReadBytesPerSec, p.ReadCallsPerSec = dr/dt, db/dt, dc/dt
				if dc > 0 {
					p.MeanReadBytes = dr / dc
				}
			}
		}
	}
}
