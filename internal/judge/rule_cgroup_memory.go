package judge

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func init() {
	register(Rule{ID: "memory-cgroup-limit", Title: "The job's memory grows toward its cgroup's limit; the cgroup's OOM kills",
		// Sources: Linux kernel documentation, Control Group v2, Memory
		// (memory.max, memory.high, memory.current, memory.stat anon/file,
		// memory.events high/max/oom/oom_kill) and cgroup v1 memory
		// (memory.limit_in_bytes, memory.usage_in_bytes, memory.failcnt,
		// memory.oom_control oom_kill, memory.stat total_rss/total_cache).
		Run: runCgroupMemory, Emits: []string{"memory-cgroup-limit", "memory-cgroup-oom-kill"}})
}

// memReading is one slow-tier reading of a memory cgroup.
type memReading struct {
	t    int64
	m    timeline.CgroupMem
	anon float64 // anon where memory.stat was read, else usage
}

// memCgroup is one memory cgroup that limits processes of the job.
type memCgroup struct {
	at       string // the cgroup setting the limit
	version  int
	limit    uint64
	high     *uint64
	members  []*derive.Proc
	readings []memReading
	anonRead bool
}

// jobMemCgroups groups the job's processes by the memory cgroup setting
// their limit, and gathers each cgroup's readings (one per tick: processes
// of one cgroup share one read).
func jobMemCgroups(in *Input) []*memCgroup {
	by := map[string]*memCgroup{}
	pidCg := map[int]*memCgroup{}
	for _, p := range in.Job.Procs {
		if p.Info == nil || p.Info.Cgroup == nil || p.Info.Cgroup.MemMax == nil {
			continue
		}
		c := p.Info.Cgroup
		key := c.MemLimitAt
		g := by[key]
		if g == nil {
			g = &memCgroup{at: key, version: c.MemVersion, limit: *c.MemMax, high: c.MemHigh}
			by[key] = g
		}
		g.members = append(g.members, p)
		pidCg[p.Key.PID] = g
	}
	for _, tk := range in.Timeline.Ticks {
		seen := map[*memCgroup]bool{}
		for _, ps := range tk.Procs {
			g := pidCg[ps.PID]
			if g == nil || seen[g] || ps.Cgroup == nil || ps.Cgroup.Mem == nil {
				continue
			}
			seen[g] = true
			m := *ps.Cgroup.Mem
			r := memReading{t: tk.T, m: m, anon: float64(m.Usage)}
			if m.Anon != nil {
				r.anon = float64(*m.Anon)
				g.anonRead = true
			}
			g.readings = append(g.readings, r)
		}
	}
	out := make([]*memCgroup, 0, len(by))
	for _, g := range by {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at < out[j].at })
	return out
}

// slope is the least-squares growth of the readings' anonymous memory (of
// usage where memory.stat was not read), bytes per second.
func (g *memCgroup) slope() float64 {
	gauge := make(derive.Gauge, len(g.readings))
	ts := make([]int64, len(g.readings))
	for i, r := range g.readings {
		gauge[i], ts[i] = r.anon, r.t
	}
	return gauge.Slope(ts)
}

func runCgroupMemory(in *Input) []finding.Finding {
	var out []finding.Finding
	for _, g := range jobMemCgroups(in) {
		if len(g.readings) < 2 {
			continue
		}
		out = append(out, oomKills(in, g)...)
		if f, ok := memTowardLimit(in, g); ok {
			out = append(out, f)
		}
	}
	return out
}

func (g *memCgroup) files() (usage, stat, events string) {
	if g.version == 1 {
		return "memory.usage_in_bytes", "memory.stat total_rss, total_cache", "memory.failcnt, memory.oom_control"
	}
	return "memory.current", "memory.stat anon, file", "memory.events"
}

// memTowardLimit: the cgroup's anonymous memory grows at least
// MemCgroupMinRate and would reach the limit within MemCgroupHorizon at
// that rate. Page cache is kept apart: the kernel reclaims it before it
// kills, so it is headroom, not growth toward an OOM kill.
func memTowardLimit(in *Input, g *memCgroup) (finding.Finding, bool) {
	first, last := g.readings[0], g.readings[len(g.readings)-1]
	span := time.Duration(last.t - first.t)
	rate := g.slope()
	if len(g.readings) < thresholds.MemCgroupMinReadings || math.IsNaN(rate) || rate < thresholds.MemCgroupMinRate {
		return finding.Finding{}, false
	}
	left := float64(g.limit) - last.anon
	if left < 0 {
		left = 0
	}
	secs := left / rate
	if secs > thresholds.MemCgroupHorizon.Seconds() {
		return finding.Finding{}, false
	}
	what := "anonymous memory"
	if !g.anonRead {
		what = "memory use (memory.stat not read: page cache not told apart)"
	}
	names := memberNames(g.members, 3)
	f := finding.Finding{ID: "memory-cgroup-limit", Severity: finding.Warning, Subject: "memory cgroup " + safeText(g.at),
		Claim: fmt.Sprintf("the job's memory cgroup %s (%s) grows %s/s of %s toward its %s limit: at this rate it is reached in %s, and the kernel's OOM killer then kills a member",
			safeText(g.at), names, safetext.Bytes(rate, 1, 2), what, safetext.Bytes(float64(g.limit), 1, 2), fmtSecs(secs))}
	if secs < 60 {
		f.Severity = finding.Critical
	}
	usage, stat, events := g.files()
	src := "cgroup " + safeText(g.at) + " "
	window := fmt.Sprintf("%d readings over %.1f s", len(g.readings), span.Seconds())
	wallLast := in.Timeline.Meta.Started.Add(time.Duration(last.t)).UTC().Format(time.RFC3339Nano)
	f.Evidence = append(f.Evidence,
		ev("memory limit", float64(g.limit)/(1<<20), "MiB", "read every few seconds", src+map[int]string{1: "memory.limit_in_bytes", 2: "memory.max"}[g.version]),
		ev("growth of "+what+" (least squares)", rate/(1<<20), "MiB/s", window, src+stat),
		ev(what+", last reading", last.anon/(1<<20), "MiB", "last reading", src+stat),
		ev("time left before the limit at this rate", secs, "s", "from the last reading", "limit minus "+what+", over its growth"),
		evText("last reading", wallLast, "wall clock, UTC", "the sampler's clock"),
		ev("usage, last reading", float64(last.m.Usage)/(1<<20), "MiB", "last reading", src+usage))
	if last.m.File != nil {
		f.Evidence = append(f.Evidence, ev("page cache (reclaimable before any OOM kill), last reading", float64(*last.m.File)/(1<<20), "MiB", "last reading", src+stat))
	}
	if g.high != nil {
		f.Evidence = append(f.Evidence, ev("memory.high (reclaim throttling above it)", float64(*g.high)/(1<<20), "MiB", "read every few seconds", src+"memory.high"))
	}
	if last.m.Events && g.version == 2 && last.m.High > first.m.High {
		f.Evidence = append(f.Evidence, ev("times its allocations were throttled above memory.high", float64(last.m.High-first.m.High), "events", window, src+events+" high"))
		f.Claim += fmt.Sprintf("; its allocations were throttled above memory.high %d times", last.m.High-first.m.High)
	}
	if last.m.Events && last.m.Max > first.m.Max {
		f.Evidence = append(f.Evidence, ev("times its usage hit the limit", float64(last.m.Max-first.m.Max), "events", window, src+events))
	}
	// Each member's own growth (resident set, least squares over the
	// window): which of them grows.
	members := append([]*derive.Proc(nil), g.members...)
	sort.SliceStable(members, func(i, j int) bool { return nanZero(members[i].RSSGrowth) > nanZero(members[j].RSSGrowth) })
	for i, p := range members {
		if i == 3 || math.IsNaN(p.RSSGrowth) {
			break
		}
		f.Evidence = append(f.Evidence, ev("resident set growth of "+memberNames([]*derive.Proc{p}, 1), p.RSSGrowth/(1<<20), "MiB/s", in.window(len(in.View.Intervals)),
			"/proc/"+strconv.Itoa(p.Key.PID)+"/statm resident, least squares"))
	}
	f.Decision = "Find what grows (a cache, tensors kept alive across steps, a leak in a worker) and bound it, or raise the container's memory limit above the job's peak; " +
		"page cache is not counted here, as the kernel reclaims it first."
	return f, true
}

// oomKills names the members the cgroup's OOM killer killed: an increase
// of the cgroup's oom_kill count between two readings, and the members
// that exited between them.
func oomKills(in *Input, g *memCgroup) []finding.Finding {
	var out []finding.Finding
	_, _, events := g.files()
	for i := 1; i < len(g.readings); i++ {
		a, b := g.readings[i-1], g.readings[i]
		if !b.m.Events || b.m.OOMKill <= a.m.OOMKill {
			continue
		}
		n := b.m.OOMKill - a.m.OOMKill
		slack := int64(in.Timeline.Meta.Interval)
		var victims []*derive.Proc
		for _, p := range g.members {
			if p.Info.Exited && p.Info.LastSeen >= a.t-slack && p.Info.LastSeen <= b.t {
				victims = append(victims, p)
			}
		}
		who := fmt.Sprintf("%d member(s) not seen by name (exited between readings without being sampled)", n)
		if len(victims) > 0 {
			who = memberNames(victims, 5)
		}
		when := in.Timeline.Meta.Started.Add(time.Duration(b.t)).UTC().Format("15:04:05.000")
		f := finding.Finding{ID: "memory-cgroup-oom-kill", Severity: finding.Critical, Subject: "memory cgroup " + safeText(g.at),
			Claim: fmt.Sprintf("the OOM killer of the memory cgroup %s killed %s (%d kill(s) by %s UTC): the cgroup reached its %s limit",
				safeText(g.at), who, n, when, safetext.Bytes(float64(g.limit), 1, 2)),
			Evidence: []finding.Evidence{
				ev("OOM kills in the cgroup", float64(n), "processes", fmt.Sprintf("between readings %.1f s and %.1f s into the window", float64(a.t)/1e9, float64(b.t)/1e9), "cgroup "+safeText(g.at)+" "+events+" oom_kill"),
				ev("usage before the kill", float64(a.m.Usage)/(1<<20), "MiB", "the reading before", "cgroup "+safeText(g.at)),
			},
			Decision: "Raise the memory limit above the job's peak or bound what grows; the kernel log (dmesg) has the kill's full report where it is readable.",
		}
		out = append(out, f)
	}
	return out
}

// memberNames names processes as "python3 (pid 42, rank 1)".
func memberNames(ps []*derive.Proc, n int) string {
	var parts []string
	for i, p := range ps {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(ps)-n))
			break
		}
		s := safeText(p.Info.Comm) + " (pid " + strconv.Itoa(p.Key.PID)
		if r := p.Rank(); r != "" {
			s += ", rank " + safeText(r)
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}

func fmtSecs(s float64) string {
	switch {
	case s < 120:
		return strconv.FormatFloat(s, 'f', 1, 64) + " s"
	case s < 7200:
		return strconv.FormatFloat(s/60, 'f', 1, 64) + " min"
	}
	return strconv.FormatFloat(s/3600, 'f', 1, 64) + " h"
}
