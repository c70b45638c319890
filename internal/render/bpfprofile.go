package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// How many threads and rows the verbose report shows of the syscall
// summary and the driver calls (the JSON report has them all).
const (
	syscallThreads = 8
	syscallRows    = 12
	driverThreads  = 8
)

// driverCalls writes each thread's CUDA driver calls: launches per second,
// copies, allocations, and the time inside syncs.
func (t *textWriter) driverCalls(d *profile.DriverCalls) {
	if d == nil {
		return
	}
	window := time.Duration(d.WindowNS)
	how := "all the window"
	if !d.LaunchContinuous {
		how = fmt.Sprintf("in bursts, %s of it", time.Duration(d.LaunchProbedNS).Round(10*time.Millisecond))
	}
	t.printf("\nCUDA DRIVER CALLS (uprobes on the driver library over %s; launches counted %s", window.Round(100*time.Millisecond), how)
	if d.Dropped > 0 {
		t.printf("; %d calls not counted: the table was full", d.Dropped)
	}
	t.printf(")\n")
	for _, l := range d.Libraries {
		line := fmt.Sprintf("  %s: %d entry points probed", l.Path, l.Probes)
		if l.Simulated {
			line += " (the simulated driver)"
		}
		if len(l.Errors) > 0 {
			line += fmt.Sprintf("; %d could not be probed: %s", len(l.Errors), strings.Join(l.Errors, "; "))
		}
		t.printf("%s\n", line)
	}
	if len(d.Libraries) == 0 {
		t.printf("  no process of the job had a CUDA driver library mapped\n")
		return
	}
	if len(d.Threads) == 0 {
		t.printf("  no thread of the job called the driver's probed entry points\n")
		return
	}
	for i, th := range d.Threads {
		if i == driverThreads {
			t.printf("  (%d more threads)\n", len(d.Threads)-i)
			break
		}
		var parts []string
		if th.Launches > 0 {
			parts = append(parts, d.LaunchRate(th)+" launches/s")
		}
		if th.GraphLaunches > 0 {
			parts = append(parts, fmt.Sprintf("%.1f graph launches/s", d.PerSecond(th.GraphLaunches)))
		}
		parts = append(parts, copyKinds(th)...)
		if th.Allocs > 0 || th.Frees > 0 {
			parts = append(parts, fmt.Sprintf("%.1f allocations/s (%s), %.1f frees/s", d.PerSecond(th.Allocs), bytesText(th.AllocBytes), d.PerSecond(th.Frees)))
		}
		if th.Syncs > 0 || th.InSync != nil {
			s := fmt.Sprintf("%d syncs, %s inside (%.0f%% of the window)", th.Syncs, time.Duration(th.SyncNS).Round(time.Millisecond),
				100*float64(th.SyncNS)/float64(max(d.WindowNS, 1)))
			if th.InSync != nil {
				s += fmt.Sprintf(", inside %s at the end", th.InSync.Symbol)
			}
			parts = append(parts, s)
		}
		t.printf("  tid %d %s (pid %d): %s\n", th.TID, th.Comm, th.PID, strings.Join(parts, "; "))
	}
}

// copyKinds says a thread's copies by direction and form.
func copyKinds(th profile.ThreadDriver) []string {
	type k struct {
		dir   string
		async bool
	}
	calls, bytes := map[k]uint64{}, map[k]uint64{}
	var order []k
	for _, c := range th.Calls {
		if c.Class != profile.CallCopy {
			continue
		}
		key := k{c.Copy, c.Async}
		if _, ok := calls[key]; !ok {
			order = append(order, key)
		}
		calls[key] += c.Calls
		bytes[key] += c.Bytes
	}
	var out []string
	for _, key := range order {
		form := "sync"
		if key.async {
			form = "async"
		}
		out = append(out, fmt.Sprintf("%d %s copies %s (%s)", calls[key], key.dir, form, bytesText(bytes[key])))
	}
	return out
}

func bytesText(n uint64) string { return safetext.Bytes(float64(n), 1, 1) }

// syscalls writes the job's syscall table (strace -c's columns) and each
// busiest thread's top syscalls.
func (t *textWriter) syscalls(s *profile.SyscallSummary) {
	if s == nil {
		return
	}
	t.printf("\nSYSCALLS (counted in the kernel over %s, %d processes; time from entry to exit", time.Duration(s.WindowNS).Round(100*time.Millisecond), len(s.PIDs))
	if s.Dropped > 0 {
		t.printf("; %d calls not counted: the table was full", s.Dropped)
	}
	t.printf(")\n")
	if len(s.Totals) == 0 {
		t.printf("  no syscall of the job returned in the window\n")
	} else {
		var b strings.Builder
		_ = profile.WriteSyscallTable(&b, s.Totals, syscallRows)
		for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			t.printf("  %s\n", line)
		}
	}
	for i, th := range s.Threads {
		if i == syscallThreads {
			t.printf("  (%d more threads)\n", len(s.Threads)-i)
			break
		}
		var parts []string
		for j, r := range th.Syscalls {
			if j == 3 {
				break
			}
			p := fmt.Sprintf("%s %d (%s)", r.Name, r.Calls, time.Duration(r.TimeNS).Round(time.Millisecond))
			if r.Errors > 0 {
				p += fmt.Sprintf(", %d failed", r.Errors)
			}
			parts = append(parts, p)
		}
		line := fmt.Sprintf("  tid %d %s (pid %d): %d calls, %s in syscalls", th.TID, th.Comm, th.PID, th.Calls, time.Duration(th.TimeNS).Round(time.Millisecond))
		if len(parts) > 0 {
			line += ": " + strings.Join(parts, ", ")
		}
		if th.InProgress != nil {
			line += fmt.Sprintf("; inside %s for %s at the end", th.InProgress.Name, time.Duration(th.InProgress.SinceNS).Round(time.Millisecond))
		}
		t.printf("%s\n", line)
	}
}
