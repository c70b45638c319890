package judge

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func init() {
	register(Rule{ID: "ranks", Title: "What each rank's launch thread did, and the rank the others wait for",
		// Sources: PyTorch distributed docs (collectives block the calling
		// rank until every rank of the group joined); Gloo's TCP transport
		// (a rank waits for its peers' data on its sockets).
		Run: runRanks, Emits: []string{"ranks", "rank-straggler"}})
}

// Rank states, as the per-rank table words them.
const (
	RankBusy       = "busy"
	RankCollective = "waits in a collective"
	RankData       = "waits for data"
	RankSleeps     = "sleeps"
	RankDead       = "dead"
	RankMixed      = "mixed"
)

// RankView is one rank as the per-rank table shows it.
type RankView struct {
	Rank, World string
	Proc        *derive.Proc
	Thread      *derive.Thread // its launch thread (the main thread); nil when gone
	GPUs        []int
	State       string
	// Demand is the launch thread's mean running plus runnable share of a
	// core, percent; Asleep the share of samples it slept, percent.
	Demand, Asleep float64
	// Peer, Data, Timer count the readings of where it slept: on a peer
	// (futex, socket, poll: a collective), on a pipe (a data queue), on a
	// timer; Readings all readings.
	Peer, Data, Timer, Readings int
	Top                         string
}

// pollCalls wait on a set of descriptors the sampler does not decode.
var pollCalls = map[string]bool{"poll": true, "ppoll": true, "select": true, "pselect6": true,
	"epoll_wait": true, "epoll_pwait": true, "epoll_pwait2": true}

// rankWait sorts one reading of where a thread slept: "peer", "data",
// "timer" or "". withWorkers says the rank has DataLoader or
// multiprocessing workers of its own: its main thread polls their result
// pipes for batches (a collective waits on a futex or a socket read), so a
// poll there is a wait for data.
func rankWait(b *timeline.Blocked, withWorkers bool) string {
	if b == nil {
		return ""
	}
	if strings.HasPrefix(b.On, "pipe:") || strings.HasPrefix(b.Wchan, "pipe_") {
		return "data"
	}
	if withWorkers && (pollCalls[b.Syscall] || b.Syscall == "" && (strings.HasPrefix(b.Wchan, "do_sys_poll") || strings.HasPrefix(b.Wchan, "do_select"))) {
		return "data"
	}
	if timerCalls[b.Syscall] || strings.HasPrefix(b.Wchan, "hrtimer_nanosleep") || strings.HasPrefix(b.Wchan, "do_nanosleep") {
		return "timer"
	}
	switch b.Syscall {
	case "futex", "poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2":
		return "peer"
	case "read", "recvfrom", "recvmsg", "recvmmsg", "readv":
		if strings.HasPrefix(b.On, "socket:") {
			return "peer"
		}
	}
	for _, w := range []string{"futex", "sk_wait_data", "unix_stream_read", "ep_poll", "do_sys_poll", "do_select", "inet_csk_accept"} {
		if strings.HasPrefix(b.Wchan, w) {
			return "peer"
		}
	}
	return ""
}

// rankViews reads every rank of the job (a process whose role is rank,
// with a RANK), sorted by rank.
func rankViews(tl *timeline.Timeline, a *derive.View) []RankView {
	var out []RankView
	workers := map[int]bool{} // pid -> it has worker processes of its own
	for _, p := range a.Procs {
		if p.Info != nil && !p.Info.Exited && (p.Role == "dataloader-worker" || p.Role == "worker") {
			workers[p.Info.PPID] = true
		}
	}
	for _, p := range a.Procs {
		r := p.Rank()
		if r == "" || p.Role != "rank" {
			continue
		}
		v := RankView{Rank: r, World: p.Info.Env["WORLD_SIZE"], Proc: p}
		for _, th := range p.Threads {
			if th.Key.TID == p.Key.PID {
				v.Thread = th
			}
		}
		v.GPUs = rankGPUs(tl, p.Key.PID)
		if p.Info.Exited || v.Thread == nil || v.Thread.CPU.N == 0 {
			v.State = RankDead
			if !p.Info.Exited && v.Thread != nil {
				v.State = RankMixed // present, not measured
			}
			out = append(out, v)
			continue
		}
		th := v.Thread
		v.Demand = nanZero(th.CPU.Mean) + nanZero(th.Wait.Mean)
		w := profileWaits(th, p, len(th.CPUPct)+1)
		if w.Ticks > 0 {
			v.Asleep = 100 * float64(w.Sleeping+w.Disk) / float64(w.Ticks)
		}
		v.Top = w.topWaits(1)
		for i := 0; i < len(th.CPUPct)+1; i++ {
			s := th.Sample(i)
			if s == nil || (s.State != 'S' && s.State != 'D') || s.Blocked == nil || s.Blocked.NotVisible != "" {
				continue // not read on this tick: where it slept is unknown, not "elsewhere"
			}
			v.Readings++
			switch rankWait(s.Blocked, workers[p.Key.PID]) {
			case "peer":
				v.Peer++
			case "data":
				v.Data++
			case "timer":
				v.Timer++
			}
		}
		share := func(n int) float64 {
			if v.Readings == 0 {
				return 0
			}
			return 100 * float64(n) / float64(v.Readings)
		}
		switch {
		case v.Demand >= thresholds.RankBusyPct:
			v.State = RankBusy
		case v.Asleep >= thresholds.RankWaitPct && share(v.Peer) >= thresholds.RankWaitPct:
			v.State = RankCollective
		case v.Asleep >= thresholds.RankWaitPct && share(v.Data) >= thresholds.RankWaitPct:
			v.State = RankData
		case v.Asleep >= thresholds.RankWaitPct && share(v.Timer) >= thresholds.RankWaitPct:
			v.State = RankSleeps
		default:
			v.State = RankMixed
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool {
		a, errA := strconv.Atoi(out[i].Rank)
		b, errB := strconv.Atoi(out[j].Rank)
		if errA == nil && errB == nil && a != b {
			return a < b
		}
		return out[i].Rank < out[j].Rank
	})
	return out
}

// rankGPUs are the devices listing pid as a compute process.
func rankGPUs(tl *timeline.Timeline, pid int) []int {
	seen := map[int]bool{}
	var out []int
	for _, tk := range tl.Ticks {
		for _, g := range tk.GPUs {
			for _, p := range g.Processes {
				if p.PID == pid && !seen[g.Index] {
					seen[g.Index] = true
					out = append(out, g.Index)
				}
			}
		}
	}
	sort.Ints(out)
	return out
}

// PeerShare is the share of the readings of where the launch thread slept
// that were peer waits, percent (0 with no reading).
func (v RankView) PeerShare() float64 {
	if v.Readings == 0 {
		return 0
	}
	return 100 * float64(v.Peer) / float64(v.Readings)
}

// Straggler is the rank its peers wait for: it alone does not wait in a
// collective while every other live rank does. A rank whose own waits are
// mixed counts as not waiting only when its share of peer waits is
// StragglerPeerGap points under every waiting rank's (a rank that sleeps
// most of its step and joins the collective last spends a little of it in
// the collective, and a second's readings catch that). nil when none is
// named.
func Straggler(ranks []RankView) *RankView {
	var straggler *RankView
	waiting, minPeer := 0, 100.0
	for i := range ranks {
		if ranks[i].State == RankCollective {
			waiting++
			minPeer = min(minPeer, ranks[i].PeerShare())
		}
	}
	for i := range ranks {
		switch ranks[i].State {
		case RankCollective:
		case RankBusy, RankData, RankSleeps:
			if straggler != nil {
				return nil // two ranks not waiting: no single one to name
			}
			straggler = &ranks[i]
		case RankMixed:
			if ranks[i].Readings == 0 || ranks[i].PeerShare() > minPeer-thresholds.StragglerPeerGap || straggler != nil {
				return nil
			}
			straggler = &ranks[i]
		default:
			return nil // dead: frozen-job triage speaks of a dead rank
		}
	}
	if waiting == 0 || straggler == nil {
		return nil
	}
	return straggler
}

// rankLine is one row of the per-rank table: "pid 41, GPU 0: busy 92 % of
// a core".
//
// A futex, socket or poll wait is a collective's when a straggler is named
// (every other rank waits while it alone runs); otherwise it may as well be
// a lock of the rank's own, and the row says only what it waits on.
func rankLine(v RankView, straggler bool) string {
	gpu := "no GPU"
	if len(v.GPUs) > 0 {
		gpu = "GPU " + ints(v.GPUs)
	}
	what := v.State
	switch v.State {
	case RankBusy:
		what = fmt.Sprintf("busy, its launch thread wants %.0f %% of a core", v.Demand)
	case RankCollective:
		state := v.State
		if !straggler {
			state = "waits on a peer or a lock"
		}
		what = fmt.Sprintf("%s %.0f %% of the window (%s)", state, v.Asleep, v.Top)
	case RankData, RankSleeps:
		what = fmt.Sprintf("%s %.0f %% of the window (%s)", v.State, v.Asleep, v.Top)
	case RankMixed:
		what = fmt.Sprintf("neither busy nor waiting on one thing: %.0f %% of a core, asleep %.0f %% of the window", v.Demand, v.Asleep)
	case RankDead:
		what = "dead: its process exited"
	}
	return fmt.Sprintf("pid %d, %s: %s", v.Proc.Key.PID, gpu, what)
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// runRanks: with two ranks or more, the per-rank table (one evidence row per
// rank, "rank N"), and the straggler when one is named.
func runRanks(in *Input) []finding.Finding {
	ranks := in.Job.Ranks
	if len(ranks) < 2 {
		return nil
	}
	s := in.Job.Straggler
	var rows []finding.Evidence
	for _, v := range ranks {
		e := finding.Evidence{What: "rank " + v.Rank, Text: rankLine(v, s != nil), Source: fmt.Sprintf("/proc/%d/task/%d/{stat,schedstat,syscall,wchan}", v.Proc.Key.PID, v.Proc.Key.PID)}
		if v.Thread != nil {
			e.Value = math.Round(v.Demand*10) / 10
			e.Unit = "% of a core"
		}
		rows = append(rows, e)
	}
	world := ranks[0].World
	if world == "" {
		world = strconv.Itoa(len(ranks))
	}
	if s == nil {
		return []finding.Finding{{ID: "ranks", Severity: finding.Info, Subject: fmt.Sprintf("%d ranks", len(ranks)),
			Claim:    fmt.Sprintf("%d ranks of %s seen; no straggler: no single rank runs while all the others wait for it in a collective", len(ranks), world),
			Evidence: rows}}
	}
	var waiters []string
	minWait := 100.0
	for _, v := range ranks {
		if v.State == RankCollective {
			waiters = append(waiters, v.Rank)
			minWait = min(minWait, v.Asleep)
		}
	}
	who := "rank " + waiters[0] + " waits"
	if len(waiters) > 1 {
		who = "ranks " + strings.Join(waiters, ", ") + " wait"
	}
	doing := map[string]string{RankBusy: "runs its own work", RankData: "waits for its input data", RankSleeps: "sleeps",
		RankMixed: fmt.Sprintf("spends the window on its own work and waits (%.0f %% of a core, %.0f %% of its waits on peers)", s.Demand, s.PeerShare())}[s.State]
	f := finding.Finding{ID: "rank-straggler", Severity: finding.Warning, Subject: fmt.Sprintf("rank %s (pid %d)", s.Rank, s.Proc.Key.PID),
		Claim: fmt.Sprintf("rank %s of %s (pid %d) is the straggler: it %s while %s for it in a collective (at least %.0f %% of the window); the job runs at rank %s's pace",
			s.Rank, world, s.Proc.Key.PID, doing, who, minWait, s.Rank),
		Evidence: rows,
		Decision: "Speed up rank " + s.Rank + " first: every step waits for its slowest rank. Find what it does that its peers do not (its own input pipeline, an uneven shard, a CPU-heavy step, a slower or shared CPU or GPU) with its own row above and -v; balancing the work across ranks shortens every rank's step.",
	}
	return []finding.Finding{f}
}

// stragglerVerdict makes a running job's verdict the straggler's: when the
// verdict's cause is about the straggler's launch thread (findLaunchThread
// prefers it), the summary says which rank it is and the cause finding
// carries the other ranks' wait as evidence.
func stragglerVerdict(in *Input, v *finding.Verdict, fs []finding.Finding) {
	s, launchThread := in.Job.Straggler, in.Job.Launch
	if s == nil || launchThread == nil || launchThread.Proc != s.Proc || len(v.Because) == 0 {
		return
	}
	switch v.Class {
	case finding.Inconclusive, finding.Stalled, finding.Idle:
		return
	}
	for i := range fs {
		if fs[i].ID != v.Because[0] {
			continue
		}
		var ev []finding.Evidence
		for _, r := range in.Job.Ranks {
			if r.State == RankCollective {
				ev = append(ev, finding.Evidence{What: fmt.Sprintf("rank %s (pid %d) waits for rank %s in a collective", r.Rank, r.Proc.Key.PID, s.Rank),
					Value: math.Round(r.Asleep*10) / 10, Unit: "% of the window", Text: fmt.Sprintf("%.0f %% of the window (%s)", r.Asleep, r.Top),
					Source: fmt.Sprintf("/proc/%d/task/%d/{stat,syscall,wchan}", r.Proc.Key.PID, r.Proc.Key.PID)})
			}
		}
		at := min(1, len(fs[i].Evidence))
		fs[i].Evidence = append(fs[i].Evidence[:at:at], append(ev, fs[i].Evidence[at:]...)...)
		world := s.World
		if world == "" {
			world = strconv.Itoa(len(in.Job.Ranks))
		}
		v.Summary = fmt.Sprintf("rank %s of %s, the straggler the other ranks wait for: %s", s.Rank, world, v.Summary)
		return
	}
}
