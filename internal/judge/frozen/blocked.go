package frozen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// BlockedThread is where one thread of the job is at the end of the window.
type BlockedThread struct {
	PID, TID int
	// State is the thread's state at its last sample (R, S, D, T, Z ...).
	State byte
	// Wchan, Syscall and On are the last "where it waits" the sampler read
	// (internal/timeline.Blocked); NotVisible says why they could not be.
	Wchan, Syscall, On, NotVisible string
	// InD is how long the thread has been in uninterruptible sleep at its
	// last sample (consecutive samples in D with no run between them:
	// schedstat's run count and run time unchanged); MaxD the longest such
	// run in the window.
	InD, MaxD time.Duration
	// Exited: the thread was not sampled at the end of the window.
	Exited bool
}

// Waits says in words where the thread is: "read on pipe", "futex",
// "running", "in wchan pipe_read".
func (b BlockedThread) Waits() string {
	switch b.State {
	case 'R':
		return "running"
	case 'Z', 'X':
		return "exited (zombie)"
	case 'T', 't':
		return "stopped"
	}
	switch {
	case b.Syscall == "futex" || b.Syscall == "futex_waitv":
		return "futex" // a lock or condition; the address (in On) tells which
	case b.Syscall != "" && b.On != "":
		return b.Syscall + " on " + onKind(b.On)
	case b.Syscall != "":
		return b.Syscall
	case b.Wchan != "" && b.Wchan != "0":
		return "in " + b.Wchan
	case b.NotVisible != "":
		return "somewhere not visible"
	}
	return "sleeping (where not read)"
}

// onKind names what a wait is on: "pipe", "socket", "eventfd", "file".
func onKind(on string) string {
	switch {
	case strings.HasPrefix(on, "pipe:"):
		return "pipe"
	case strings.HasPrefix(on, "socket:"):
		return "socket"
	case strings.HasPrefix(on, "anon_inode:["):
		return strings.TrimSuffix(strings.TrimPrefix(on, "anon_inode:["), "]")
	case strings.HasPrefix(on, "/"):
		return "file"
	}
	return safe(on)
}

// BlockedThreads lists every thread of the job at its last sample, with
// how long it has been in D. Threads are ordered by pid, then tid.
func BlockedThreads(v *view) []BlockedThread {
	type acc struct {
		b             BlockedThread
		dStart        int64
		inD           bool
		lastT         int64
		slices, runNS uint64
	}
	m := map[int]*acc{}
	for _, tk := range v.tl.Ticks {
		for _, s := range tk.Threads {
			a := m[s.TID]
			if a == nil {
				a = &acc{b: BlockedThread{PID: s.PID, TID: s.TID}}
				m[s.TID] = a
			}
			a.b.State = s.State
			if s.Blocked != nil {
				a.b.Wchan, a.b.Syscall, a.b.On, a.b.NotVisible = s.Blocked.Wchan, s.Blocked.Syscall, s.Blocked.On, s.Blocked.NotVisible
			}
			if s.State == 'D' {
				// A thread scheduled in since the last sample left its
				// sleep and entered another: a module import from a cold
				// page cache is in D at every sample, a read at a time,
				// and is not stuck in the kernel.
				ran := s.Slices != a.slices || s.RunNS != a.runNS
				if !a.inD || ran {
					a.inD, a.dStart = true, tk.T
				}
				if d := time.Duration(tk.T - a.dStart); d > a.b.MaxD {
					a.b.MaxD = d
				}
			} else {
				a.inD = false
			}
			a.lastT, a.slices, a.runNS = tk.T, s.Slices, s.RunNS
		}
	}
	out := make([]BlockedThread, 0, len(m))
	for _, a := range m {
		a.b.Exited = a.lastT != v.t1
		if a.inD && !a.b.Exited {
			a.b.InD = time.Duration(a.lastT - a.dStart)
		}
		out = append(out, a.b)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].PID != out[j].PID {
			return out[i].PID < out[j].PID
		}
		return out[i].TID < out[j].TID
	})
	return out
}

// blockedTable is the finding listing where every live thread waits,
// identical waits of one process grouped.
func blockedTable(v *view, threads []BlockedThread, severity finding.Severity) (finding.Finding, bool) {
	type group struct {
		pid   int
		what  string
		on    string
		wchan string
		state byte
		tids  []int
	}
	var groups []*group
	index := map[string]*group{}
	counts := map[string]int{}
	live := 0
	for _, b := range threads {
		if b.Exited {
			continue
		}
		live++
		what := b.Waits()
		counts[what]++
		key := fmt.Sprintf("%d|%s|%s|%s|%c", b.PID, what, b.On, b.Wchan, b.State)
		g := index[key]
		if g == nil {
			g = &group{pid: b.PID, what: what, on: b.On, wchan: b.Wchan, state: b.State}
			index[key] = g
			groups = append(groups, g)
		}
		g.tids = append(g.tids, b.TID)
	}
	if live == 0 {
		return finding.Finding{}, false
	}
	var summary []string
	for what, n := range counts {
		summary = append(summary, fmt.Sprintf("%d %s", n, what))
	}
	sort.Slice(summary, func(i, j int) bool {
		ni, _ := strconv.Atoi(strings.Fields(summary[i])[0])
		nj, _ := strconv.Atoi(strings.Fields(summary[j])[0])
		if ni != nj {
			return ni > nj
		}
		return summary[i] < summary[j]
	})
	f := finding.Finding{
		ID:       "blocked-threads",
		Severity: severity,
		Claim:    fmt.Sprintf("Where the job's %s are: %s", plural(live, "thread", "threads"), strings.Join(summary, ", ")),
		Decision: "Follow the wait: a read on a pipe or socket waits for the process at the other end (a peer rank, a DataLoader worker), a futex waits for a lock or condition held by another thread of the same process; `gpufeed diagnose --py-stacks` shows the Python line each thread waits on.",
		// Sources: 000 §4
		Supports: finding.Stalled,
		Subject:  "job",
	}
	at := "at " + fmtSeconds(time.Duration(v.t1-v.t0)) + " into the window"
	for i, g := range groups {
		if i == thresholds.MaxBlockedRows {
			f.Evidence = append(f.Evidence, finding.Evidence{What: "more waits not listed", Value: float64(len(groups) - i), Unit: "groups"})
			break
		}
		text := fmt.Sprintf("%s, state %c", g.what, g.state)
		if g.on != "" {
			text += ", on " + safe(g.on)
		}
		if g.wchan != "" && g.wchan != "0" {
			text += ", wchan " + safe(g.wchan)
		}
		who := v.procName(g.pid) + ": " + plural(len(g.tids), "thread", "threads") + " " + tidList(v, g.tids)
		f.Evidence = append(f.Evidence, finding.Evidence{What: who, Text: text, Window: at,
			Source: fmt.Sprintf("/proc/%d/task/TID/{stat,wchan,syscall}", g.pid)})
	}
	return f, true
}

// tidList names up to three threads: "tid 1 (main), tid 2 (x), ...".
func tidList(v *view, tids []int) string {
	var parts []string
	for i, t := range tids {
		if i == 3 {
			parts = append(parts, "...")
			break
		}
		parts = append(parts, v.threadName(t))
	}
	return strings.Join(parts, ", ")
}

// uninterruptible is the finding for threads stuck in D.
func uninterruptible(v *view, threads []BlockedThread) (finding.Finding, bool) {
	var rows []finding.Evidence
	longest := time.Duration(0)
	for _, b := range threads {
		if b.MaxD < thresholds.DStateWarn {
			continue
		}
		longest = max(longest, b.MaxD)
		text := "in D for " + fmtSeconds(b.MaxD)
		switch {
		case b.InD > 0 && b.InD == b.MaxD:
			text = "in D for " + fmtSeconds(b.InD) + " and still there at the end"
		case b.InD > 0:
			// The evidence names the same sleep the claim counts: the
			// longest, then the one still going at the end.
			text += ", and in another sleep in D for " + fmtSeconds(b.InD) + " still there at the end"
		}
		if b.Wchan != "" && b.Wchan != "0" {
			text += ", wchan " + safe(b.Wchan)
		}
		if b.Syscall != "" {
			text += ", in " + b.Syscall
		}
		if b.On != "" {
			text += " on " + safe(b.On)
		}
		rows = append(rows, finding.Evidence{What: v.procName(b.PID) + " " + v.threadName(b.TID), Value: b.MaxD.Seconds(),
			Unit: "s", Text: text, Window: v.windowText(), Source: fmt.Sprintf("/proc/%d/task/%d/stat (state D)", b.PID, b.TID)})
	}
	if len(rows) == 0 {
		return finding.Finding{}, false
	}
	return finding.Finding{
		ID:       "uninterruptible-sleep",
		Severity: finding.Warning,
		Claim:    fmt.Sprintf("%s in uninterruptible sleep (D) for up to %s: waiting on the kernel (storage, network file system or a driver), not on the program", plural(len(rows), "thread", "threads"), fmtSeconds(longest)),
		Evidence: rows,
		Decision: "A thread in D cannot be interrupted, not even killed: look at the device or file system named by its wchan (`cat /proc/PID/stack` as root), at `dmesg -T` for hung-task reports and I/O errors, and at the storage's own health.",
		// Sources: 004 (frozen jobs: the evidence is in the kernel)
		Supports: finding.Stalled,
		Subject:  "job",
	}, true
}
