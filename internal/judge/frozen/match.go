package frozen

import (
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// A rank that died before gpufeed saw it has no environment left to read:
// its zombie's /proc/PID/environ is empty, and the kernel's kill line names
// a pid, a command and a cgroup, never a rank. The rank is told by
// elimination: the ranks' size (WORLD_SIZE, or LOCAL_WORLD_SIZE for the
// node's ranks) less the ranks alive leaves the missing ones; the dead
// process is tied to one of them by being the launcher's child, by the
// order in which the launcher started its ranks (pids and start times
// increase with the rank), by its command, and by its memory cgroup.

// Match sureness.
const (
	// MatchSure: one rank missing, one dead child of the ranks' launcher,
	// in its place in the launch order.
	MatchSure = "sure"
	// MatchLikely: the dead process is known only from the kernel log, or
	// ranks beyond the dead ones may run on other nodes.
	MatchLikely = "likely"
)

// RankMatch ties a dead process that carries no rank to the rank missing.
type RankMatch struct {
	// Label is "rank" (RANK, WORLD_SIZE) or "local rank" (LOCAL_RANK,
	// LOCAL_WORLD_SIZE); Rank its number.
	Label string
	Rank  int
	// Sure is MatchSure or MatchLikely; Why the evidence, in order.
	Sure string
	Why  []string
}

// Name is "rank 2".
func (m *RankMatch) Name() string { return m.Label + " " + strconv.Itoa(m.Rank) }

// How says how sure the match is and why, in one line.
func (m *RankMatch) How() string { return m.Sure + ": " + strings.Join(m.Why, "; ") }

// rankNumbering is how the live ranks number themselves.
type rankNumbering struct {
	label   string // "rank" or "local rank"
	sizeVar string // "WORLD_SIZE" or "LOCAL_WORLD_SIZE"
	size    int
	alive   map[int]int // rank -> pid
	// parent is the live ranks' common parent (their launcher), 0 when they
	// have none in common; comm their common command name.
	parent int
	comm   string
	// ordered: the launcher started them in rank order (pids increase with
	// the rank); onlyNode: the size says every rank runs here.
	ordered  bool
	onlyNode bool
	// local maps a live global rank to its LOCAL_RANK, when every live
	// rank has one (global numbering only).
	local map[int]int
}

func envInt(p *timeline.ProcInfo, k string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimSpace(p.Env[k]))
	return n, err == nil && n >= 0 && n <= 1<<20
}

// numbering reads the ranks alive at the end of the window: a global
// numbering (RANK among WORLD_SIZE) when every live rank has both and the
// node's size does not say otherwise, else the node's (LOCAL_RANK among
// LOCAL_WORLD_SIZE). ok is false when the ranks do not agree on a size.
func (v *view) numbering() (rankNumbering, bool) {
	var live []*timeline.ProcInfo
	for _, pid := range v.sortedPIDs() {
		if p := v.procs[pid]; isRankProcess(p) && v.alive(pid) {
			live = append(live, p)
		}
	}
	if len(live) == 0 {
		return rankNumbering{}, false
	}
	same := func(k string) (int, bool) {
		n, ok := envInt(live[0], k)
		for _, p := range live[1:] {
			if m, ok2 := envInt(p, k); !ok2 || m != n {
				return 0, false
			}
		}
		return n, ok
	}
	world, hasWorld := same("WORLD_SIZE")
	local, hasLocal := same("LOCAL_WORLD_SIZE")
	n := rankNumbering{alive: map[int]int{}}
	key := ""
	switch {
	case hasWorld && (!hasLocal || local == world):
		n.label, n.sizeVar, n.size, key = "rank", "WORLD_SIZE", world, "RANK"
		n.onlyNode = hasLocal
	case hasLocal:
		n.label, n.sizeVar, n.size, key = "local rank", "LOCAL_WORLD_SIZE", local, "LOCAL_RANK"
		n.onlyNode = true
	default:
		return n, false
	}
	n.parent, n.comm = live[0].PPID, live[0].Comm
	for _, p := range live {
		r, ok := envInt(p, key)
		if !ok || r >= n.size {
			return n, false
		}
		if _, dup := n.alive[r]; dup {
			return n, false
		}
		n.alive[r] = p.Key.PID
		if lr, ok := envInt(p, "LOCAL_RANK"); ok && key == "RANK" {
			if n.local == nil {
				n.local = map[int]int{}
			}
			n.local[r] = lr
		}
		if p.PPID != n.parent {
			n.parent = 0
		}
		if p.Comm != n.comm {
			n.comm = ""
		}
	}
	ranks := n.sortedAlive()
	n.ordered = true
	for i := 1; i < len(ranks); i++ {
		if n.alive[ranks[i]] <= n.alive[ranks[i-1]] {
			n.ordered = false
		}
	}
	return n, n.size > 0
}

// nextOnNode predicts the global rank of the node's next local rank from
// the live ranks' (LOCAL_RANK, RANK) pairs, which must fit one line.
func (n rankNumbering) nextOnNode() (int, bool) {
	if len(n.local) < 2 || len(n.local) != len(n.alive) {
		return 0, false
	}
	ranks := n.sortedAlive()
	l0, l1 := n.local[ranks[0]], n.local[ranks[1]]
	if l1 == l0 || (ranks[1]-ranks[0])%(l1-l0) != 0 {
		return 0, false
	}
	stride := (ranks[1] - ranks[0]) / (l1 - l0)
	base := ranks[0] - l0*stride
	maxLocal := 0
	for _, r := range ranks {
		if n.local[r]*stride+base != r {
			return 0, false
		}
		maxLocal = max(maxLocal, n.local[r])
	}
	if stride <= 0 {
		return 0, false
	}
	return base + (maxLocal+1)*stride, true
}

func (n rankNumbering) sortedAlive() []int {
	var rs []int
	for r := range n.alive {
		rs = append(rs, r)
	}
	sort.Ints(rs)
	return rs
}

// missing lists the ranks below size that are neither alive nor dead with
// a rank of their own.
func (n rankNumbering) missing(deadRanks map[int]bool) []int {
	var out []int
	for r := range n.size {
		if _, ok := n.alive[r]; !ok && !deadRanks[r] {
			out = append(out, r)
		}
	}
	return out
}

// deadCandidate is a dead process without a rank that may be one.
type deadCandidate struct {
	pid   int
	death *Death // nil for a kill in the log not yet counted as a death
	kill  *kernlog.Kill
	proc  *timeline.ProcInfo // nil when never sampled
}

var cgroupRankName = regexp.MustCompile(`(?i)(?:^|[/_.-])(?:rank|task|local_rank|localrank|proc)[_-]?(\d+)$`)

// matchRanks ties dead processes without a rank to the missing ranks, and
// returns the kills known only from the kernel log that it tied (new
// deaths). It marks each matched death.
func (v *view) matchRanks(deaths []Death, kills []kernlog.Kill) []Death {
	n, ok := v.numbering()
	if !ok {
		return nil
	}
	deadRanks := map[int]bool{}
	var cands []deadCandidate
	for i := range deaths {
		d := &deaths[i]
		if _, r, ok := rank(v.procs[d.PID]); ok {
			deadRanks[r] = true
			continue
		}
		c := deadCandidate{pid: d.PID, death: d, kill: d.Kill, proc: v.procs[d.PID]}
		cands = append(cands, c)
	}
	counted := map[int]bool{}
	for _, d := range deaths {
		counted[d.PID] = true
	}
	// A rank missing from the job's tree was already gone when the window
	// began: a process the tree never showed, killed well after that, was
	// started after the window began and is not it (the tree is listed
	// whenever a pid is handed out, so a process that lived longer than
	// a tick would have been seen). On a shared host another job's kill
	// during the window otherwise took the missing rank's place beside
	// the real one and left both unnamed.
	var late []int
	for i := range kills {
		k := &kills[i]
		if counted[k.PID] || n.comm == "" || k.Comm != n.comm {
			continue
		}
		if _, inJob := v.jobPIDOf(k.PID); inJob {
			continue // a pid of the job alive now: not this kill
		}
		if v.killedAfterStart(k) {
			late = append(late, k.PID)
			continue
		}
		cands = append(cands, deadCandidate{pid: k.PID, kill: k})
	}
	missing := n.missing(deadRanks)
	if len(missing) == 0 || len(cands) == 0 {
		return nil
	}
	// Dead children of the ranks' launcher, seen in the job's tree and
	// killed themselves, outrank kills known only from the kernel log: on a shared host another job's
	// process of the same command (python3) is killed too, and its pid,
	// never seen in this job, would otherwise take the missing rank's place
	// beside the zombie and leave both unnamed.
	var foreign []int
	if n.parent != 0 {
		children := 0
		for _, c := range cands {
			if c.proc != nil && c.proc.PPID == n.parent && c.kill != nil {
				children++ // killed itself: not some other child that ended
			}
		}
		if children >= len(missing) {
			kept := cands[:0]
			for _, c := range cands {
				if c.proc == nil && c.death == nil {
					foreign = append(foreign, c.pid)
					continue
				}
				kept = append(kept, c)
			}
			cands = kept
		}
	}
	// Each candidate's place in the launch order narrows the ranks it can be.
	type placed struct {
		c       deadCandidate
		allowed []int
		after   int // the live rank launched just before it, -1 when none
	}
	var ps []placed
	taken := map[int]int{}
	alive := n.sortedAlive()
	for _, c := range cands {
		lo, hi, after := -1, n.size, -1
		if n.ordered {
			for _, r := range alive {
				if n.alive[r] < c.pid {
					lo, after = r, r
				} else if hi == n.size {
					hi = r
				}
			}
		}
		var allowed []int
		for _, r := range missing {
			if r > lo && r < hi {
				allowed = append(allowed, r)
			}
		}
		// Past the last live rank, with ranks possibly on other nodes: the
		// node's ranks follow RANK = base + LOCAL_RANK x stride (a block,
		// stride 1, or round robin over the nodes), so the next local rank
		// names the global one.
		if len(allowed) > 1 && hi == n.size && n.ordered && !n.onlyNode {
			if r, ok := n.nextOnNode(); ok && slices.Contains(allowed, r) {
				allowed = []int{r}
			}
		}
		if len(allowed) == 1 {
			taken[allowed[0]]++
		}
		ps = append(ps, placed{c: c, allowed: allowed, after: after})
	}
	var added []Death
	for _, p := range ps {
		if len(p.allowed) != 1 || taken[p.allowed[0]] != 1 {
			continue // no single place, or shared with another dead process
		}
		r := p.allowed[0]
		m := &RankMatch{Label: n.label, Rank: r, Sure: MatchLikely}
		aliveNames := n.label + "s " + rankRanges(alive)
		if len(alive) == 1 {
			aliveNames = n.label + " " + strconv.Itoa(alive[0])
		}
		if len(missing) == 1 {
			m.Why = append(m.Why, n.sizeVar+"="+strconv.Itoa(n.size)+" with "+aliveNames+" alive leaves "+m.Name()+" missing")
		} else {
			m.Why = append(m.Why, n.sizeVar+"="+strconv.Itoa(n.size)+" with "+aliveNames+" alive leaves "+n.label+"s "+rankRanges(missing)+" unaccounted for here")
		}
		child := p.c.proc != nil && n.parent != 0 && p.c.proc.PPID == n.parent
		if child {
			what := "child"
			if p.c.proc.Exited && v.lastSampled(p.c.pid) <= v.t0 {
				what = "zombie child"
			}
			m.Why = append(m.Why, "pid "+strconv.Itoa(p.c.pid)+" is a "+what+" of the ranks' launcher (pid "+strconv.Itoa(n.parent)+"), like "+aliveNames)
		} else if p.c.proc == nil {
			m.Why = append(m.Why, "pid "+strconv.Itoa(p.c.pid)+" is gone (reaped): only the kernel log shows it, and it names no rank")
		}
		if p.c.kill != nil && n.comm != "" && p.c.kill.Comm == n.comm {
			m.Why = append(m.Why, "the kernel killed a "+safe(n.comm)+" process, the ranks' command")
		}
		if len(foreign) > 0 && child {
			what := "the kernel log's other " + safe(n.comm) + " kill (pid " + ints(foreign) + ") is of a process never seen in the job, not a child of its launcher"
			if len(foreign) > 1 {
				what = "the kernel log's " + strconv.Itoa(len(foreign)) + " other " + safe(n.comm) + " kills (pids " + ints(foreign) + ") are of processes never seen in the job, not children of its launcher"
			}
			m.Why = append(m.Why, what)
		}
		if len(late) > 0 {
			what := "the kernel log's other " + safe(n.comm) + " kill (pid " + ints(late) + ") came after the window began, of a process the job's tree never showed"
			if len(late) > 1 {
				what = "the kernel log's " + strconv.Itoa(len(late)) + " other " + safe(n.comm) + " kills (pids " + ints(late) + ") came after the window began, of processes the job's tree never showed"
			}
			m.Why = append(m.Why, what)
		}
		if n.ordered && len(alive) > 1 {
			order := "pids increase with the rank (" + pidsByRank(n, alive) + "): the launcher started them in order"
			if p.after >= 0 {
				order += ", and pid " + strconv.Itoa(p.c.pid) + " comes after " + n.label + " " + strconv.Itoa(p.after) + "'s"
			} else {
				order += ", and pid " + strconv.Itoa(p.c.pid) + " comes before them"
			}
			m.Why = append(m.Why, order)
		}
		if p.c.proc != nil && p.after >= 0 {
			if prev := v.procs[n.alive[p.after]]; prev != nil && p.c.proc.Key.StartTime >= prev.Key.StartTime {
				gap := startGap(prev.Key.StartTime, p.c.proc.Key.StartTime, v.clockTick())
				if strings.HasPrefix(gap, "within") {
					gap += " as"
				}
				m.Why = append(m.Why, "it started "+gap+" "+n.label+" "+strconv.Itoa(p.after))
			}
		}
		if p.c.kill != nil {
			if s := v.cgroupTie(p.c.kill, r); s != "" {
				m.Why = append(m.Why, s)
			}
		}
		if child && len(missing) == 1 && len(cands) == 1 {
			m.Sure = MatchSure
		}
		if p.c.death != nil {
			p.c.death.Match = m
		} else {
			k := p.c.kill
			added = append(added, Death{PID: k.PID, Cause: "oom-kill", Kill: k, When: k.Wall, Via: "kernel log", Match: m})
		}
		if v.matched == nil {
			v.matched = map[int]*RankMatch{}
		}
		v.matched[p.c.pid] = m
	}
	return added
}

// lateKillSlack is how long after the window's first reading a process
// the job's tree never showed may have been killed and still have been
// missed by it: a process born and killed between two listings.
const lateKillSlack = time.Second

// killedAfterStart says a kill came more than lateKillSlack after the
// window's first reading (unknown times say no).
func (v *view) killedAfterStart(k *kernlog.Kill) bool {
	return v.samples > 0 && !k.Wall.IsZero() && k.Wall.After(v.wall(v.t0).Add(lateKillSlack))
}

// lastSampled is the T of a pid's last sample (math.MinInt64 when never).
func (v *view) lastSampled(pid int) int64 {
	if t, ok := v.lastProcT[pid]; ok {
		return t
	}
	return -1 << 62
}

func pidsByRank(n rankNumbering, ranks []int) string {
	var parts []string
	for _, r := range ranks {
		parts = append(parts, strconv.Itoa(r)+": "+strconv.Itoa(n.alive[r]))
	}
	return strings.Join(parts, ", ")
}

// startGap says how long after start time a start time b is (clock ticks).
func startGap(a, b uint64, hz float64) string {
	if b == a {
		return "within the same clock tick (" + strconv.Itoa(int(1000/hz)) + " ms)"
	}
	d := time.Duration(float64(b-a) / hz * float64(time.Second))
	if d < time.Second {
		return strconv.Itoa(int(d.Milliseconds())) + " ms after"
	}
	return fmtSeconds(d) + " after"
}

// cgroupTie says how a kill's memory cgroup relates to the live ranks'.
func (v *view) cgroupTie(k *kernlog.Kill, r int) string {
	cg := k.TaskMemCG
	if cg == "" {
		cg = k.MemCG
	}
	if cg == "" {
		return ""
	}
	var out []string
	named := false
	if m := cgroupRankName.FindStringSubmatch(cg); m != nil && m[1] == strconv.Itoa(r) {
		named = true
		out = append(out, "its memory cgroup's name ("+safe(cg[strings.LastIndexByte(cg, '/')+1:])+") carries the number "+m[1])
	}
	cgs := v.jobCgroups()
	var sorted []string
	for c := range cgs {
		sorted = append(sorted, c)
	}
	sort.Strings(sorted)
	for _, c := range sorted {
		rel := ""
		switch {
		case c == cg:
			rel = "it was in the ranks' memory cgroup (" + safe(cg) + ")"
		case strings.HasPrefix(cg, strings.TrimSuffix(c, "/")+"/"):
			rel = "its memory cgroup (" + safe(cg) + ") is inside the ranks' (" + safe(c) + ")"
		case named && parentCgroup(c) != "" && parentCgroup(c) == parentCgroup(cg):
			// siblings tie only when the names say so (task_0 beside task_2):
			// unrelated jobs' cgroups are siblings under one parent too
			rel = "it sits beside the ranks' (" + safe(c) + ")"
		}
		if rel != "" {
			out = append(out, rel)
			break
		}
	}
	return strings.Join(out, "; ")
}

func parentCgroup(cg string) string {
	i := strings.LastIndexByte(strings.TrimSuffix(cg, "/"), '/')
	if i <= 0 {
		return ""
	}
	return cg[:i]
}
