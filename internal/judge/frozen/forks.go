package frozen

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// forkFindings says when the job keeps starting processes that end at once
// (a fork storm, a subprocess per sample): the children it started over the
// window (those that live less than a reading are missed: a lower bound),
// the CPU of the children its processes reaped (cutime+cstime, which counts
// the unseen ones too) and the host's forks over the window (every
// process's: an upper bound).
func forkFindings(v *view, p Progress) []finding.Finding {
	m := p.Measure
	streaming := m.Reaping && m.ChildCores > thresholds.StallMaxCPUCores
	if !p.Judged || !(m.Forking && m.StartedExited*2 >= m.Started) && !streaming {
		return nil
	}
	// The parent that started most of them.
	byParent := map[int]int{}
	for _, c := range v.procs {
		if c.FirstSeen > v.t0 && c.FirstSeen >= p.From {
			byParent[c.PPID]++
		}
	}
	parent, most := 0, 0
	for pid, n := range byParent {
		if n > most || n == most && pid < parent {
			parent, most = pid, n
		}
	}
	if most == 0 {
		parent = v.tl.Meta.Target.PID // none seen: the reaping is the target's tree's
		if rp := v.topReaper(p.From); rp > 0 {
			parent = rp
		}
	}
	if _, in := v.procs[parent]; !in {
		return nil // started by a process outside the job's tree: not the job's
	}
	secs := m.SpanSec
	// Each reading in which reaped children's CPU grew reaped at least
	// one: a lower bound too, often a better one than the children seen.
	seen := float64(max(most, m.ReapReadings)) / secs
	name := v.procName(parent)
	hostForks, hostOK := v.hostForks(p.From)
	claim := fmt.Sprintf("%s keeps starting processes that end at once: at least %.1f a second (%d seen, children reaped in %d readings over %.1f s; a reading holds one or many)",
		name, seen, most, m.ReapReadings, secs)
	if hostOK {
		claim += fmt.Sprintf(", up to %.0f a second (all of the host's forks)", hostForks)
	}
	f := finding.Finding{ID: "job-forks", Severity: finding.Info, Subject: name, Claim: claim,
		Evidence: []finding.Evidence{
			{What: "processes it started over the window, as seen", Value: float64(most),
				Text: fmt.Sprintf("%d, %d of the job's new processes ended within the window", most, m.StartedExited), Source: "/proc listing (ppid in /proc/PID/stat)"},
			{What: "CPU of the children the job reaped (cutime + cstime)", Text: fmt.Sprintf("%.2f %% of one core, growing in %d readings", m.ChildCores*100, m.ReapReadings),
				Source: "/proc/" + strconv.Itoa(parent) + "/stat (fields 16-17)"},
		},
		Decision: "Each process started costs a fork (copying the page tables, more for a large address space) and an exit, and a process that lives less than a reading escapes per-process accounting: start one long-lived worker instead of a process per item (a subprocess per sample or batch, a shell-out in a loop), or call a library. The job is not stalled: these starts are its progress.",
		// Sources: proc(5) (/proc/PID/stat cutime, cstime; /proc/stat processes)
	}
	if hostOK {
		f.Evidence = append(f.Evidence, finding.Evidence{What: "forks on the whole host (every process's, threads included)",
			Text: fmt.Sprintf("%.0f a second", hostForks), Source: "/proc/stat processes"})
	}
	f.Evidence = append(f.Evidence, finding.Evidence{What: "thresholds", Text: fmt.Sprintf("at least %d processes started, %s a second or more",
		thresholds.ForkMinCount, strconv.FormatFloat(thresholds.ForkMinPerSec, 'f', -1, 64))})
	return []finding.Finding{f}
}

// hostForks is the host's forks a second from from to the window's end
// (/proc/stat processes); false when the recording has no count.
func (v *view) hostForks(from int64) (float64, bool) {
	var first, last uint64
	var t0, t1 int64
	seen := false
	for _, tk := range v.tl.Ticks {
		if tk.T < from || tk.Host == nil || tk.Host.Forks == 0 {
			continue
		}
		if !seen {
			first, t0, seen = tk.Host.Forks, tk.T, true
		}
		last, t1 = tk.Host.Forks, tk.T
	}
	if !seen || t1 <= t0 || last < first {
		return 0, false
	}
	return float64(last-first) / time.Duration(t1-t0).Seconds(), true
}

// topReaper is the live process whose reaped children's CPU grew most
// from from on (0 when none).
func (v *view) topReaper(from int64) int {
	first, last := map[int]uint64{}, map[int]uint64{}
	for _, tk := range v.tl.Ticks {
		if tk.T < from {
			continue
		}
		for _, ps := range tk.Procs {
			if ps.ChildCPUTicks == nil {
				continue
			}
			if _, ok := first[ps.PID]; !ok {
				first[ps.PID] = *ps.ChildCPUTicks
			}
			last[ps.PID] = *ps.ChildCPUTicks
		}
	}
	best, most := 0, uint64(0)
	for pid, l := range last {
		if d := l - min(l, first[pid]); d > most || d == most && d > 0 && pid < best {
			best, most = pid, d
		}
	}
	return best
}

// concurrentWorkers is the most of the given processes alive at one
// reading: short-lived children started one after another never take
// turns on the CPUs together.
func (v *view) concurrentWorkers(pids []int) int {
	want := map[int]bool{}
	for _, p := range pids {
		want[p] = true
	}
	best := 0
	for _, tk := range v.tl.Ticks {
		n := 0
		for _, ps := range tk.Procs {
			if want[ps.PID] {
				n++
			}
		}
		best = max(best, n)
	}
	if best == 0 {
		return len(pids) // no per-tick readings (a fixture without them): as listed
	}
	return best
}
