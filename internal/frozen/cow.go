package frozen

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/analysis"
	"github.com/gpufeed/gpufeed/internal/finding"
)

// Growth is one worker's unique memory over the window.
type Growth struct {
	PID int
	// USSRate and PSSRate are least-squares slopes in bytes per second;
	// HasPSS is false when PSS was not read.
	USSRate, PSSRate  float64
	HasPSS            bool
	USSFirst, USSLast uint64
	Samples           int
	Span              time.Duration
}

// memGrowth reads a worker's USS (and PSS) fit from the analysis.
func memGrowth(a *analysis.Analysis, pid int) (Growth, bool) {
	p := a.ProcByPID(pid)
	g := Growth{PID: pid}
	if p == nil {
		return g, false
	}
	first, fi := p.USSBytes.First()
	last, li := p.USSBytes.Last()
	for _, x := range p.USSBytes {
		if !math.IsNaN(x) {
			g.Samples++
		}
	}
	if g.Samples < 2 {
		return g, false
	}
	g.USSFirst, g.USSLast = uint64(first), uint64(last)
	g.Span = time.Duration(a.TickT[li] - a.TickT[fi])
	g.USSRate = p.USSGrowth
	if !math.IsNaN(p.PSSGrowth) {
		g.HasPSS, g.PSSRate = true, p.PSSGrowth
	}
	return g, g.Samples >= COWMinSamples && g.Span >= COWMinSpan && !math.IsNaN(g.USSRate)
}

// growing says whether a fit shows copy-on-write growth.
func (g Growth) growing() bool {
	return g.USSRate >= COWMinRate && g.USSLast > g.USSFirst && g.USSLast-g.USSFirst >= COWMinGrowth
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

// cowFindings reports copy-on-write growth of forked workers with the time
// until the memory limit.
func cowFindings(v *view, a *analysis.Analysis, groups []WorkerGroup) []finding.Finding {
	var out []finding.Finding
	for _, g := range groups {
		if g.Method != Fork {
			continue
		}
		var grows []Growth
		var total float64
		for _, w := range g.Workers {
			gr, ok := memGrowth(a, w)
			if !ok || !gr.growing() {
				continue
			}
			grows = append(grows, gr)
			total += gr.USSRate
		}
		if len(grows) == 0 {
			continue
		}
		sort.Slice(grows, func(i, j int) bool { return grows[i].PID < grows[j].PID })
		name := v.procName(g.Parent)
		f := finding.Finding{ID: "worker-cow-growth", Severity: finding.Warning, Subject: name,
			Seed: "000 §5 (COW drill: list of objects vs flat storage)"}
		for _, gr := range grows {
			f.Evidence = append(f.Evidence, finding.Evidence{What: fmt.Sprintf("unique memory (USS) of worker pid %d: %s -> %s", gr.PID, fmtBytes(float64(gr.USSFirst)), fmtBytes(float64(gr.USSLast))),
				Value: round(gr.USSRate/(1<<20), 2), Unit: "MiB/s", Window: fmt.Sprintf("least-squares slope of %d samples over %s", gr.Samples, fmtSeconds(gr.Span)), Source: "/proc/" + strconv.Itoa(gr.PID) + "/smaps_rollup (Private_*)"})
			if gr.HasPSS {
				f.Evidence = append(f.Evidence, finding.Evidence{What: fmt.Sprintf("proportional memory (PSS) of worker pid %d", gr.PID),
					Value: round(gr.PSSRate/(1<<20), 2), Unit: "MiB/s", Window: fmt.Sprintf("over %s", fmtSeconds(gr.Span)), Source: "/proc/" + strconv.Itoa(gr.PID) + "/smaps_rollup (Pss)"})
			}
		}
		claim := fmt.Sprintf("%s of %s gain private memory at %s together: copy-on-write of the parent's pages as the workers touch its Python objects",
			plural(len(grows), "forked worker", "forked workers"), name, fmtBytes(total)+"/s")
		// How far can it go? Each worker can copy at most what the parent holds.
		parentRSS := v.lastRSS(g.Parent)
		var ceiling float64
		for _, gr := range grows {
			ceiling += max(parentRSS-float64(gr.USSLast), 0)
		}
		pids := append([]int{g.Parent}, g.Workers...)
		if h, ok := memoryHeadroom(v, pids); ok {
			eta := time.Duration(h.bytes / total * float64(time.Second))
			f.Evidence = append(f.Evidence, finding.Evidence{What: "memory left before " + h.what, Value: round(h.bytes/(1<<20), 1), Unit: "MiB", Window: "at the end of the window", Source: h.source})
			if parentRSS > 0 && ceiling < h.bytes {
				claim += fmt.Sprintf("; at most %s more once every worker has copied the parent's %s, which fits in %s", fmtBytes(ceiling), fmtBytes(parentRSS), h.what)
				f.Evidence = append(f.Evidence, finding.Evidence{What: "most the workers can still copy (parent's resident memory minus each worker's USS)", Value: round(ceiling/(1<<20), 1), Unit: "MiB", Source: "/proc/PID/statm"})
				f.Severity = finding.Info
			} else {
				claim += "; at this rate " + h.what + " is reached in " + fmtDuration(eta)
				f.Evidence = append(f.Evidence, finding.Evidence{What: "projected time until " + h.what + " is reached", Value: round(eta.Seconds(), 0), Unit: "s", Window: "linear projection of the window's rate", Source: "USS slope and the limit above"})
				if eta > COWWarnHorizon {
					f.Severity = finding.Info
				}
			}
		}
		f.Claim = claim
		f.Decision = "Keep the dataset in flat storage (numpy arrays, Arrow, torch tensors or an mmap'd file) instead of lists of Python objects: reading an object writes its reference count, which copies its page into every worker. Or use fewer workers, or load lazily per worker. gc.freeze() before forking avoids only the copies made by the garbage collector."
		out = append(out, f)
	}
	return out
}

// lastRSS is a process's last resident size in bytes (statm).
func (v *view) lastRSS(pid int) float64 {
	page := float64(v.tl.Meta.PageSize)
	if page == 0 {
		page = 4096
	}
	for i := len(v.tl.Ticks) - 1; i >= 0; i-- {
		for _, ps := range v.tl.Ticks[i].Procs {
			if ps.PID == pid {
				return float64(ps.RSSPages) * page
			}
		}
	}
	return 0
}
