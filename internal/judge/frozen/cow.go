package frozen

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// Growth is one worker's unique and resident memory over the window.
type Growth struct {
	PID int
	// USSRate, PSSRate and RSSRate are least-squares slopes in bytes per
	// second (RSS from statm, every tick); HasPSS is false when PSS was
	// not read.
	USSRate, PSSRate, RSSRate float64
	HasPSS                    bool
	USSFirst, USSLast         uint64
	// RSSLast is the last resident size.
	RSSLast float64
	Samples int
	Span    time.Duration
}

// settledFrom is the first instant (timeline T) from which a worker's
// memory is judged: thresholds.COWSettle after it started, when its age is known (the
// window's uptime and its start time), else thresholds.COWSettle after it was first
// seen when it appeared during the window; the window's start otherwise.
func (v *view) settledFrom(pid int) int64 {
	p := v.procs[pid]
	if p == nil {
		return v.t0
	}
	m := v.tl.Meta
	if m.UptimeNS > 0 && p.Key.StartTime > 0 {
		started := int64(float64(p.Key.StartTime)*1e9/v.clockTick()) - m.UptimeNS // T of its start
		return max(v.t0, started+int64(thresholds.COWSettle))
	}
	if p.FirstSeen > v.t0 {
		return p.FirstSeen + int64(thresholds.COWSettle)
	}
	return v.t0
}

// memGrowth reads a worker's USS, PSS and RSS over the window from the
// moment it settled (a fresh fork copies and allocates its first few MiB
// in its first second: that is what a worker costs, not a trend).
func memGrowth(v *view, a *derive.View, pid int) (Growth, bool) {
	p := a.ProcByPID(pid)
	g := Growth{PID: pid}
	if p == nil {
		return g, false
	}
	from := v.settledFrom(pid)
	settled := func(gauge derive.Gauge) derive.Gauge {
		out := make(derive.Gauge, len(gauge))
		for i, x := range gauge {
			out[i] = x
			if i >= len(a.TickT) || a.TickT[i] < from {
				out[i] = math.NaN()
			}
		}
		return out
	}
	uss, pss, rss := settled(p.USSBytes), settled(p.PSSBytes), settled(p.RSSBytes)
	first, fi := uss.First()
	last, li := uss.Last()
	for _, x := range uss {
		if !math.IsNaN(x) {
			g.Samples++
		}
	}
	if g.Samples < 2 {
		return g, false
	}
	g.USSFirst, g.USSLast = uint64(first), uint64(last)
	g.Span = time.Duration(a.TickT[li] - a.TickT[fi])
	g.USSRate = uss.Slope(a.TickT)
	if r := pss.Slope(a.TickT); !math.IsNaN(r) {
		g.HasPSS, g.PSSRate = true, r
	}
	if r := rss.Slope(a.TickT); !math.IsNaN(r) {
		g.RSSRate = r
	}
	if x, _ := p.RSSBytes.Last(); !math.IsNaN(x) {
		g.RSSLast = x
	}
	return g, g.Samples >= thresholds.COWMinSamples && g.Span >= thresholds.COWMinSpan && !math.IsNaN(g.USSRate)
}

// copyRate is the part of the worker's USS growth that is not new resident
// memory: pages it shared with its parent and now holds alone.
func (g Growth) copyRate() float64 {
	return max(0, g.USSRate-max(0, g.RSSRate))
}

// gained is the USS the worker gained over the window (0 when it fell).
func (g Growth) gained() float64 {
	if g.USSLast <= g.USSFirst {
		return 0
	}
	return float64(g.USSLast - g.USSFirst)
}

// headroom is the memory left before a limit, and which limit.
type headroom struct {
	bytes  float64
	what   string
	source string
	limit  float64
}

// memoryHeadroom finds the tightest limit over the given processes: their
// memory cgroups' limits minus usage, and the host's MemAvailable.
func memoryHeadroom(v *view, pids []int) (headroom, bool) {
	var best headroom
	found := false
	for _, pid := range pids {
		p := v.procs[pid]
		if p == nil || p.MemCgroup == nil || p.MemCgroup.LimitBytes == nil || p.MemCgroup.UsageBytes == nil {
			continue
		}
		left := float64(*p.MemCgroup.LimitBytes) - float64(*p.MemCgroup.UsageBytes)
		if !found || left < best.bytes {
			best = headroom{bytes: max(left, 0), what: "the memory cgroup limit (" + fmtBytes(float64(*p.MemCgroup.LimitBytes)) + " on " + safe(p.MemCgroup.LimitAt) + ")",
				source: "memory cgroup v" + strconv.Itoa(p.MemCgroup.Version) + " limit and usage", limit: float64(*p.MemCgroup.LimitBytes)}
			found = true
		}
	}
	for i := len(v.tl.Ticks) - 1; i >= 0; i-- {
		h := v.tl.Ticks[i].Host
		if h == nil || h.Mem == nil {
			continue
		}
		avail := float64(h.Mem.Available)
		if !found || avail < best.bytes {
			best = headroom{bytes: avail, what: "the host's available memory (MemAvailable)", source: "/proc/meminfo", limit: float64(h.Mem.Total)}
			found = true
		}
		break
	}
	return best, found
}

// cowFindings reports forked workers copying their parent's memory: their
// unique memory, summed over the workers, rising while their resident
// memory stays flat, against what freshly forked workers hold, projected to
// the tightest memory limit.
func cowFindings(v *view, a *derive.View, groups []WorkerGroup) []finding.Finding {
	var out []finding.Finding
	for _, g := range groups {
		if g.Method != Fork {
			continue
		}
		var all, grows []Growth
		var usRate, cpRate, gained, held float64
		baseline := float64(thresholds.COWForkBaseline)
		for _, w := range g.Workers {
			gr, ok := memGrowth(v, a, w)
			if !ok || !v.alive(w) {
				continue
			}
			all = append(all, gr)
		}
		for _, gr := range all {
			held += float64(gr.USSLast)
			if gr.USSRate <= 0 || gr.USSLast <= gr.USSFirst {
				continue
			}
			grows = append(grows, gr)
			usRate += gr.USSRate
			cpRate += gr.copyRate()
			gained += gr.gained()
		}
		if cpRate < thresholds.COWMinRate || gained < thresholds.COWMinGrowth || cpRate < thresholds.COWMinCopyShare*usRate {
			continue
		}
		sort.Slice(grows, func(i, j int) bool { return grows[i].PID < grows[j].PID })
		name := v.procName(g.Parent)
		excess := max(0, held-float64(len(all))*baseline)
		f := finding.Finding{ID: "worker-cow-growth", Severity: finding.Warning, Subject: name} // Sources: 000 §5 (COW drill: list of objects vs flat storage)
		for _, gr := range grows {
			f.Evidence = append(f.Evidence, finding.Evidence{What: fmt.Sprintf("unique memory (USS) of worker pid %d: %s -> %s", gr.PID, fmtBytes(float64(gr.USSFirst)), fmtBytes(float64(gr.USSLast))),
				Value: round(gr.USSRate/(1<<20), 2), Unit: "MiB/s", Window: fmt.Sprintf("least-squares slope of %d samples over %s", gr.Samples, fmtSeconds(gr.Span)), Source: "/proc/" + strconv.Itoa(gr.PID) + "/smaps_rollup (Private_*)"})
			f.Evidence = append(f.Evidence, finding.Evidence{What: fmt.Sprintf("resident memory (RSS) of worker pid %d, now %s", gr.PID, fmtBytes(gr.RSSLast)),
				Value: round(gr.RSSRate/(1<<20), 2), Unit: "MiB/s", Window: "least-squares slope over every sample", Source: "/proc/" + strconv.Itoa(gr.PID) + "/statm"})
			if gr.HasPSS {
				f.Evidence = append(f.Evidence, finding.Evidence{What: fmt.Sprintf("proportional memory (PSS) of worker pid %d", gr.PID),
					Value: round(gr.PSSRate/(1<<20), 2), Unit: "MiB/s", Window: fmt.Sprintf("over %s", fmtSeconds(gr.Span)), Source: "/proc/" + strconv.Itoa(gr.PID) + "/smaps_rollup (Pss)"})
			}
		}
		f.Evidence = append(f.Evidence,
			finding.Evidence{What: fmt.Sprintf("unique memory of the %s together", plural(len(all), "worker", "workers")), Value: round(held/(1<<20), 1), Unit: "MiB", Window: "last readings", Source: "/proc/PID/smaps_rollup"},
			finding.Evidence{What: "fork baseline: what a forked DataLoader worker over flat storage (numpy) holds of its own once started", Value: round(baseline/(1<<20), 1), Unit: "MiB",
				Source: "reference measurement"},
			finding.Evidence{What: "copy rate of the workers together (USS growth not matched by RSS growth)", Value: round(cpRate/(1<<20), 2), Unit: "MiB/s", Window: "sum of the slopes above", Source: "smaps_rollup and statm"})
		claim := fmt.Sprintf("%s of %s copy its memory at %s together, copy-on-write: their unique memory rises while their resident memory stays flat, so pages they shared with it become their own as they touch its Python objects; they hold %s of their own, %s more than %d fresh forks (%s each)",
			plural(len(grows), "forked worker", "forked workers"), name, fmtBytes(cpRate)+"/s", fmtBytes(held), fmtBytes(excess), len(all), fmtBytes(baseline))
		// How far can it go? A worker can copy at most what it still shares.
		var ceiling float64
		for _, gr := range grows {
			ceiling += max(gr.RSSLast-float64(gr.USSLast), 0)
		}
		pids := append([]int{g.Parent}, g.Workers...)
		if h, ok := memoryHeadroom(v, pids); ok {
			eta := time.Duration(h.bytes / cpRate * float64(time.Second))
			f.Evidence = append(f.Evidence, finding.Evidence{What: "memory left before " + h.what, Value: round(h.bytes/(1<<20), 1), Unit: "MiB", Window: "at the end of the window", Source: h.source})
			if ceiling > 0 && ceiling < h.bytes {
				claim += fmt.Sprintf("; at most %s more once each has copied all it still shares, which fits in %s", fmtBytes(ceiling), h.what)
				f.Evidence = append(f.Evidence, finding.Evidence{What: "most the workers can still copy (resident memory they still share: RSS minus USS)", Value: round(ceiling/(1<<20), 1), Unit: "MiB", Source: "/proc/PID/statm, /proc/PID/smaps_rollup"})
				f.Severity = finding.Info
			} else {
				claim += "; at this rate " + h.what + " is reached in " + fmtDuration(eta)
				f.Evidence = append(f.Evidence, finding.Evidence{What: "projected time until " + h.what + " is reached", Value: round(eta.Seconds(), 0), Unit: "s", Window: "linear projection of the window's rate", Source: "copy rate and the limit above"})
				if eta > thresholds.COWWarnHorizon {
					f.Severity = finding.Info
				}
			}
		}
		f.Claim = claim
		f.Decision = "Keep the dataset in flat storage (numpy arrays, Arrow, torch tensors or an mmap'd file) instead of lists of Python objects: reading an object writes its reference count, which copies its page into every worker. Or use fewer workers (each holds its own copy), or load lazily per worker. gc.freeze() before forking avoids only the copies made by the garbage collector."
		out = append(out, f)
	}
	return out
}
