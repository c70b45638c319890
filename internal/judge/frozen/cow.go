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
	"github.com/gpufeed/gpufeed/internal/timeline"
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
	// limitWhat names the limit itself (the cgroup's, or MemTotal).
	limitWhat string
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
				source: "memory cgroup v" + strconv.Itoa(p.MemCgroup.Version) + " limit and usage", limit: float64(*p.MemCgroup.LimitBytes),
				limitWhat: "the memory cgroup limit (" + fmtBytes(float64(*p.MemCgroup.LimitBytes)) + ")"}
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
			best = headroom{bytes: avail, what: "the host's available memory (MemAvailable)", source: "/proc/meminfo", limit: float64(h.Mem.Total),
				limitWhat: "the host's memory (MemTotal " + fmtBytes(float64(h.Mem.Total)) + ")"}
			found = true
		}
		break
	}
	return best, found
}

// workerCopies is one worker's inherited memory at its first and last
// readings of the window (smaps of it and of its parent).
type workerCopies struct {
	PID           int
	First, Last   timeline.Inherited
	TFirst, TLast int64
}

// COWLevel is what a fork group's workers hold of the memory they
// inherited from their parent, at the end of the window: the level of
// copy-on-write, whenever the window starts.
type COWLevel struct {
	Parent int
	// Workers counts the workers alive at the end with a reading.
	Workers int
	// Copied is their Private_Dirty in the mappings they share with the
	// parent (at addresses the parent's cover), summed: what they copied
	// so far.
	// Shared is what they still share there, summed: the most they can
	// still copy. ParentRSS is the parent's resident memory in those
	// mappings (the largest of the workers' last readings).
	Copied, Shared, ParentRSS float64
	// Rate is the change of Copied per second from each worker's first to
	// last reading of the window, summed (NaN when no worker was read
	// twice); Span is the longest first-to-last span among them.
	Rate float64
	Span time.Duration
	// Gained is what they copied between those readings, summed.
	Gained float64
	// Exited and Joined count the group's workers that exited during the
	// window and those forked during it: workers replaced (a DataLoader
	// without persistent_workers starts new ones every epoch).
	Exited, Joined int
	per            []workerCopies
}

// cowLevel reads a fork group's inherited-memory readings; false when no
// worker alive at the end was read.
func cowLevel(v *view, a *derive.View, g WorkerGroup) (COWLevel, bool) {
	l := COWLevel{Parent: g.Parent, Rate: math.NaN()}
	for _, w := range g.Workers {
		if info := v.procs[w]; info != nil {
			if info.Exited {
				l.Exited++
			}
			if info.FirstSeen > v.t0 {
				l.Joined++
			}
		}
		p := a.ProcByPID(w)
		if p == nil || !v.alive(w) {
			continue
		}
		wc := workerCopies{PID: w}
		// The rate counts from the worker's first reading once settled
		// (its first seconds' writes are what a fresh fork holds), the
		// level is its last reading.
		from := v.settledFrom(w)
		n := 0
		for i := range a.TickT {
			s := p.Sample(i)
			if s == nil || s.Inherited == nil || a.TickT[i] < from {
				continue
			}
			if n == 0 {
				wc.First, wc.TFirst = *s.Inherited, a.TickT[i]
			}
			wc.Last, wc.TLast = *s.Inherited, a.TickT[i]
			n++
		}
		if n == 0 {
			// Not settled yet: its level alone.
			for i := len(a.TickT) - 1; i >= 0; i-- {
				if s := p.Sample(i); s != nil && s.Inherited != nil {
					wc.First, wc.TFirst, wc.Last, wc.TLast = *s.Inherited, a.TickT[i], *s.Inherited, a.TickT[i]
					n = 1
					break
				}
			}
		}
		if n == 0 {
			continue
		}
		l.Workers++
		l.Copied += float64(wc.Last.CopiedBytes)
		l.Shared += float64(wc.Last.SharedBytes)
		l.ParentRSS = max(l.ParentRSS, float64(wc.Last.ParentRSSBytes))
		if span := time.Duration(wc.TLast - wc.TFirst); n >= 2 && span > 0 {
			d := (float64(wc.Last.CopiedBytes) - float64(wc.First.CopiedBytes)) / span.Seconds()
			if math.IsNaN(l.Rate) {
				l.Rate = 0
			}
			l.Rate += d
			l.Gained += float64(wc.Last.CopiedBytes) - float64(wc.First.CopiedBytes)
			l.Span = max(l.Span, span)
		}
		l.per = append(l.per, wc)
	}
	if !math.IsNaN(l.Rate) {
		l.Rate = max(l.Rate, 0)
	}
	return l, l.Workers > 0
}

// levelFound says the workers hold enough copies to report whatever their
// rate: COWMinCopied beyond what as many fresh forks hold, and on average
// COWMinCopiedShare of what the parent holds in those mappings (interpreter
// objects every worker touches are a fixed cost, its dataset is not).
func (l COWLevel) levelFound() bool {
	excess := l.Copied - float64(l.Workers)*float64(thresholds.COWInheritedBaseline)
	return excess >= thresholds.COWMinCopied && l.ParentRSS > 0 &&
		l.Copied/float64(l.Workers) >= thresholds.COWMinCopiedShare*l.ParentRSS
}

// copying says the workers copy now: their copies grew by COWMinGrowth
// and at COWMinCopiedRate or more together between their readings.
func (l COWLevel) copying() bool {
	return !math.IsNaN(l.Rate) && l.Gained >= thresholds.COWMinGrowth && l.Rate >= thresholds.COWMinCopiedRate
}

// cowLevels returns the inherited-memory level of every fork group that
// was read (the agent's copied-bytes metric, compare's row).
func cowLevels(v *view, a *derive.View, groups []WorkerGroup) []COWLevel {
	var out []COWLevel
	for _, g := range groups {
		if g.Method != Fork {
			continue
		}
		if l, ok := cowLevel(v, a, g); ok {
			out = append(out, l)
		}
	}
	return out
}

// cowFindings reports forked workers holding or making copies of their
// parent's memory (copy-on-write), judged per fork group by two measures:
// the level (what they copied of the mappings they inherited, from smaps,
// whenever the window starts) and the rate (their unique memory rising
// while their resident memory stays flat), against what freshly forked
// workers hold, with the consequence set against the tightest memory limit.
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
		rising := cpRate >= thresholds.COWMinRate && gained >= thresholds.COWMinGrowth && cpRate >= thresholds.COWMinCopyShare*usRate
		lv, haveLevel := cowLevel(v, a, g)
		if !rising && !(haveLevel && (lv.levelFound() || lv.copying())) {
			continue
		}
		sort.Slice(grows, func(i, j int) bool { return grows[i].PID < grows[j].PID })
		name := v.procName(g.Parent)
		f := finding.Finding{ID: "worker-cow-growth", Severity: finding.Warning, Subject: name} // Sources: 000 §5 (COW drill: list of objects vs flat storage)
		var claim string
		// rate is the copy rate the claim and the projection use: the
		// level's own when read twice, else the USS slopes'.
		rate := cpRate
		// ceiling is the most the workers can still copy.
		var ceiling float64
		if haveLevel {
			ibase := float64(thresholds.COWInheritedBaseline)
			excess := max(0, lv.Copied-float64(lv.Workers)*ibase)
			sort.Slice(lv.per, func(i, j int) bool { return lv.per[i].PID < lv.per[j].PID })
			for _, w := range lv.per {
				f.Evidence = append(f.Evidence, finding.Evidence{What: fmt.Sprintf("copied by worker pid %d: its own pages in the %d mappings it shares with its parent, %s -> %s", w.PID, w.Last.Mappings, fmtBytes(float64(w.First.CopiedBytes)), fmtBytes(float64(w.Last.CopiedBytes))),
					Value: round(float64(w.Last.CopiedBytes)/(1<<20), 1), Unit: "MiB", Window: fmt.Sprintf("readings %s apart", fmtSeconds(time.Duration(w.TLast-w.TFirst))),
					Source: "/proc/" + strconv.Itoa(w.PID) + "/smaps and /proc/" + strconv.Itoa(g.Parent) + "/smaps (Private_Dirty of its anonymous mappings at addresses the parent's cover)"})
			}
			f.Evidence = append(f.Evidence,
				finding.Evidence{What: fmt.Sprintf("copied so far by the %s together (copy-on-write)", plural(lv.Workers, "worker", "workers")), Value: round(lv.Copied/(1<<20), 1), Unit: "MiB", Window: "last readings", Source: "/proc/PID/smaps"},
				finding.Evidence{What: "what a fresh fork holds of its own in those mappings (pages it wrote as it started)", Value: round(ibase/(1<<20), 1), Unit: "MiB", Source: "reference measurement"},
				finding.Evidence{What: "the parent's resident memory in the mappings they inherited", Value: round(lv.ParentRSS/(1<<20), 1), Unit: "MiB", Window: "last readings", Source: "/proc/" + strconv.Itoa(g.Parent) + "/smaps (Rss)"},
				finding.Evidence{What: "most the workers can still copy (what they still share in those mappings)", Value: round(lv.Shared/(1<<20), 1), Unit: "MiB", Window: "last readings", Source: "/proc/PID/smaps (Shared_Clean + Shared_Dirty)"})
			claim = fmt.Sprintf("%s of %s hold %s of private copies of its memory, copy-on-write: pages they shared with it became their own as they touched its Python objects; that is %s more than %d fresh forks (%s each), %s per worker of the %s it holds in those mappings",
				plural(lv.Workers, "forked worker", "forked workers"), name, fmtBytes(lv.Copied), fmtBytes(excess), lv.Workers, fmtBytes(ibase), fmtBytes(lv.Copied/float64(lv.Workers)), fmtBytes(lv.ParentRSS))
			ceiling = lv.Shared
			if !math.IsNaN(lv.Rate) {
				rate = lv.Rate
				f.Evidence = append(f.Evidence, finding.Evidence{What: "copy rate of the workers together (change of what they copied)", Value: round(lv.Rate/(1<<20), 2), Unit: "MiB/s",
					Window: fmt.Sprintf("first to last reading, up to %s", fmtSeconds(lv.Span)), Source: "/proc/PID/smaps"})
				if lv.Rate >= 1<<10 {
					claim += fmt.Sprintf("; they copy %s together now", fmtBytes(lv.Rate)+"/s")
				} else {
					claim += "; they copy nothing more now"
				}
			}
			if lv.Exited > 0 && lv.Joined > 0 {
				f.Evidence = append(f.Evidence, finding.Evidence{What: "workers replaced during the window (exited, and forked anew)", Value: float64(min(lv.Exited, lv.Joined)), Window: "the window", Source: "/proc/PID/stat"})
				claim += fmt.Sprintf("; %s exited and %s forked during the window: workers started anew (each epoch without persistent_workers) copy again from nothing", plural(lv.Exited, "worker", "workers"), plural(lv.Joined, "was", "were"))
			}
		}
		if rising {
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
			if !haveLevel {
				excess := max(0, held-float64(len(all))*baseline)
				claim = fmt.Sprintf("%s of %s copy its memory at %s together, copy-on-write: their unique memory rises while their resident memory stays flat, so pages they shared with it become their own as they touch its Python objects; they hold %s of their own, %s more than %d fresh forks (%s each)",
					plural(len(grows), "forked worker", "forked workers"), name, fmtBytes(cpRate)+"/s", fmtBytes(held), fmtBytes(excess), len(all), fmtBytes(baseline))
				// A worker can copy at most what it still shares.
				for _, gr := range grows {
					ceiling += max(gr.RSSLast-float64(gr.USSLast), 0)
				}
			}
		}
		f.Severity = cowSeverity(v, g, &f, &claim, haveLevel, lv, rate, ceiling)
		f.Claim = claim
		f.Decision = "Keep the dataset in flat storage (numpy arrays, Arrow, torch tensors or an mmap'd file) instead of lists of Python objects: reading an object writes its reference count, which copies its page into every worker. Or use fewer workers (each holds its own copy), or load lazily per worker. gc.freeze() before forking avoids only the copies made by the garbage collector."
		if lv.Exited > 0 && lv.Joined > 0 {
			f.Decision += " With DataLoader(persistent_workers=True) the workers live across epochs and copy once."
		}
		out = append(out, f)
	}
	return out
}

// cowSeverity sets the consequence of the copies against the tightest
// memory limit (the memory cgroup's, else MemAvailable): a warning when
// what they already copied is COWWarnShare or more of the limit, or when
// at the present rate the limit is reached within COWWarnHorizon; info when
// all they can still copy fits, or the limit is far.
func cowSeverity(v *view, g WorkerGroup, f *finding.Finding, claim *string, haveLevel bool, lv COWLevel, rate, ceiling float64) finding.Severity {
	pids := append([]int{g.Parent}, g.Workers...)
	h, ok := memoryHeadroom(v, pids)
	if !ok {
		return finding.Warning
	}
	sev := finding.Warning
	f.Evidence = append(f.Evidence, finding.Evidence{What: "memory left before " + h.what, Value: round(h.bytes/(1<<20), 1), Unit: "MiB", Window: "at the end of the window", Source: h.source})
	switch {
	case ceiling > 0 && ceiling < h.bytes:
		*claim += fmt.Sprintf("; at most %s more once each has copied all it still shares, which fits in %s", fmtBytes(ceiling), h.what)
		if !haveLevel {
			f.Evidence = append(f.Evidence, finding.Evidence{What: "most the workers can still copy (resident memory they still share: RSS minus USS)", Value: round(ceiling/(1<<20), 1), Unit: "MiB", Source: "/proc/PID/statm, /proc/PID/smaps_rollup"})
		}
		sev = finding.Info
	case rate >= 1<<10:
		eta := time.Duration(h.bytes / rate * float64(time.Second))
		*claim += "; at this rate " + h.what + " is reached in " + fmtDuration(eta)
		f.Evidence = append(f.Evidence, finding.Evidence{What: "projected time until " + h.what + " is reached", Value: round(eta.Seconds(), 0), Unit: "s", Window: "linear projection of the window's rate", Source: "copy rate and the limit above"})
		if eta > thresholds.COWWarnHorizon {
			sev = finding.Info
		}
	default:
		// Not copying now: what they still share would not fit, but
		// nothing moves toward the limit.
		*claim += fmt.Sprintf("; all they still share (%s) would not fit in %s", fmtBytes(ceiling), h.what)
		sev = finding.Info
	}
	if haveLevel && h.limit > 0 && lv.Copied >= thresholds.COWWarnShare*h.limit {
		*claim += fmt.Sprintf("; the copies already take %.0f %% of %s", 100*lv.Copied/h.limit, h.limitWhat)
		f.Evidence = append(f.Evidence, finding.Evidence{What: "the copies' share of " + h.limitWhat, Value: round(100*lv.Copied/h.limit, 1), Unit: "%", Window: "last readings", Source: h.source})
		sev = finding.Warning
	}
	return sev
}
