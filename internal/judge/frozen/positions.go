package frozen

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Where each member of a stalled job stands, from its main thread's Python
// stack (diagnose --py-stacks). From /proc alone the member the others wait
// for cannot be named: every rank's main thread waits in a futex, and the
// sockets' receive queues stay empty because the backend's I/O threads keep
// reading. The stacks tell them apart: a rank inside a torch.distributed
// collective waits for its peers; a rank outside any while the others wait
// in one is the member they wait for (seed 004, "The NCCL hang": the
// survivors wait in a collective for a peer that never arrives).

// position is one rank's place.
type position struct {
	pid, rank int
	// collective is the torch.distributed call it waits in ("" outside).
	collective string
	at         profile.Frame // the collective's frame, or the innermost frame
	caller     profile.Frame // the innermost frame of the user's code, when not at
	hasCaller  bool
}

// c10dFile is torch.distributed's Python front end, where every collective
// (all_reduce, barrier, broadcast, all_gather, send/recv...) is a function.
var c10dFile = regexp.MustCompile(`(^|/)torch/distributed/(distributed_c10d|c10d_logger)\.py$`)

// libraryFile says a frame is in an installed package or the standard
// library, not in the user's code.
var libraryFile = regexp.MustCompile(`/(site|dist)-packages/|/lib/python\d\.\d+/|^<`)

func (p position) where() string {
	s := p.at.Function + " (" + p.at.File + lineSuffix(p.at.Line) + ")"
	if p.hasCaller {
		s += ", called from " + p.caller.Function + " (" + p.caller.File + lineSuffix(p.caller.Line) + ")"
	}
	return safe(s)
}

func lineSuffix(n int) string {
	if n <= 0 {
		return ""
	}
	return ":" + strconv.Itoa(n)
}

// positionOf reads a rank's position from its main thread's frames.
func positionOf(pid, rank int, frames []profile.Frame) (position, bool) {
	if len(frames) == 0 {
		return position{}, false
	}
	p := position{pid: pid, rank: rank, at: frames[0]}
	start := 0
	for i, f := range frames {
		if c10dFile.MatchString(f.File) && !strings.HasPrefix(f.Function, "_") {
			p.collective, p.at, start = f.Function, f, i
			// the outermost frame of the same file is the user's call
			for j := i + 1; j < len(frames) && c10dFile.MatchString(frames[j].File); j++ {
				p.collective, p.at, start = frames[j].Function, frames[j], j
			}
			break
		}
	}
	if libraryFile.MatchString(p.at.File) || p.collective != "" {
		for _, f := range frames[start+1:] {
			if !libraryFile.MatchString(f.File) {
				p.caller, p.hasCaller = f, true
				break
			}
		}
	}
	return p, true
}

// rankPositions names where each rank of a stalled job stands, when the
// stacks of two or more ranks were read.
func rankPositions(v *view, stalled bool) []finding.Finding {
	if !stalled {
		return nil
	}
	var pos []position
	for _, ev := range v.tl.Events {
		if ev.Kind != timeline.EventPyStacks {
			continue
		}
		procs, err := profile.ParsePySpy(strings.NewReader(ev.Text))
		if err != nil {
			continue // the python-stacks finding says so
		}
		for _, p := range procs {
			_, r, ok := rank(v.procs[p.PID])
			if !ok {
				continue
			}
			var main *profile.Thread
			for i := range p.Threads {
				if p.Threads[i].TID == p.PID {
					main = &p.Threads[i]
				}
			}
			if main == nil && len(p.Threads) > 0 {
				main = &p.Threads[0]
			}
			if main == nil {
				continue
			}
			if q, ok := positionOf(p.PID, r, main.Frames); ok {
				pos = append(pos, q)
			}
		}
	}
	if len(pos) < 2 {
		return nil
	}
	sort.Slice(pos, func(i, j int) bool { return pos[i].rank < pos[j].rank })
	groups := map[string][]position{} // by collective ("" outside)
	for _, p := range pos {
		groups[p.collective] = append(groups[p.collective], p)
	}
	var ev []finding.Evidence
	for _, p := range pos {
		what := v.procName(p.pid) + ", main thread"
		if p.collective != "" {
			what += ", waiting in " + p.collective
		} else {
			what += ", outside any collective"
		}
		ev = append(ev, finding.Evidence{What: what, Text: p.where(), Source: "Python stack at the end of the window"})
	}
	ranksOf := func(ps []position) []int {
		var out []int
		for _, p := range ps {
			out = append(out, p.rank)
		}
		return out
	}
	outside := groups[""]
	delete(groups, "")
	// groups in the order of their lowest rank
	var names []string
	for name := range groups {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool { return groups[names[i]][0].rank < groups[names[j]][0].rank })
	// Sources: 004 (The NCCL hang)
	f := finding.Finding{ID: "rank-positions", Severity: finding.Info, Subject: "job", Evidence: ev}
	switch {
	case len(outside) > 0 && len(groups) > 0:
		// Some wait in a collective; the ranks outside are what they wait for.
		var waiting []string
		for _, name := range names {
			ps := groups[name]
			verb := "wait"
			if len(ps) == 1 {
				verb = "waits"
			}
			waiting = append(waiting, fmt.Sprintf("%s %s in %s", rankWho("", ranksOf(ps)), verb, ps[0].where()))
		}
		var stuck []string
		for _, p := range outside {
			stuck = append(stuck, fmt.Sprintf("%s is at %s", v.procName(p.pid), p.where()))
		}
		who := rankWho("", ranksOf(outside))
		verb := "is the member"
		if len(outside) > 1 {
			verb = "are the members"
		}
		f.Severity, f.Supports = finding.Critical, finding.Stalled
		f.Claim = fmt.Sprintf("%s %s the others wait for: %s, outside any collective, while %s", who, verb, strings.Join(stuck, "; "), strings.Join(waiting, "; "))
		f.Decision = fmt.Sprintf("Look at %s's line: what it waits on there (a lock, a queue, a file, a condition only it can meet) holds the whole job, since the others cannot leave the collective without it. Fix that wait or give it a timeout, and give the process group a timeout (init_process_group(timeout=...)) so that a stuck rank becomes an error instead of a silent stall.", who)
	case len(groups) > 1:
		// Every rank is in a collective, not the same one: a mismatch.
		var parts []string
		for _, name := range names {
			parts = append(parts, fmt.Sprintf("%s in %s", rankWho("", ranksOf(groups[name])), groups[name][0].where()))
		}
		f.Severity, f.Supports = finding.Critical, finding.Stalled
		f.Claim = "The ranks wait in different collectives, so none can complete: " + strings.Join(parts, "; ")
		f.Decision = "Every rank must call the same collectives in the same order: find the branch that lets one rank skip or add a call (a condition on the rank, on data, an early exit), and set TORCH_DISTRIBUTED_DEBUG=DETAIL to have mismatches reported."
	case len(groups) == 1:
		for _, ps := range groups {
			f.Claim = fmt.Sprintf("%s wait in %s: the member they wait for is not among the ranks read (dead, not started, or on another host)", rankWho("", ranksOf(ps)), ps[0].where())
		}
	default:
		var parts []string
		for _, p := range outside {
			parts = append(parts, fmt.Sprintf("%s at %s", v.procName(p.pid), p.where()))
		}
		f.Claim = "No rank waits in a collective: " + strings.Join(parts, "; ")
	}
	return []finding.Finding{f}
}
