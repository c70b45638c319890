package frozen

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// kernelFindings reports the kernel log lines about the job or its GPUs
// that are not already a death: GPU Xid errors and fallen-off-the-bus
// reports, hung-task reports naming the job's threads, and OOM kills of
// other processes on the host.
func kernelFindings(v *view, deaths []Death) []finding.Finding {
	var out []finding.Finding
	explained := map[int]bool{}
	for _, d := range deaths {
		explained[d.PID] = true
	}
	var xids, fell, hung, other []kernlog.Event
	for _, ev := range v.kernelEvents() {
		switch ev.Kind {
		case kernlog.GPUXid:
			if ev.FellOff {
				fell = append(fell, ev)
			} else {
				xids = append(xids, ev)
			}
		case kernlog.NVRM:
			if ev.FellOff {
				fell = append(fell, ev)
			}
		case kernlog.HungTask:
			if _, ok := v.jobPIDOf(ev.PID); ok {
				hung = append(hung, ev)
			}
		case kernlog.OOMKill:
			if _, inJob := v.jobPIDOf(ev.PID); !inJob && !explained[ev.PID] && v.inWindow(ev) {
				other = append(other, ev)
			}
		}
	}
	if len(fell) > 0 {
		out = append(out, finding.Finding{
			ID: "gpu-fell-off-bus", Severity: finding.Critical, Supports: finding.Stalled,
			Claim:    "A GPU fell off the bus (Xid 79): the driver lost it, and every process using it is stuck or dead",
			Evidence: eventRows(v, fell, 5),
			Decision: "Drain the node: a GPU that fell off the bus needs a reset or a reboot; check its power, cooling and PCIe seating, and the node's `nvidia-smi -q` and BMC logs.",
			// Sources: 004 (the evidence is in the kernel log)
			Subject: "host",
		})
	}
	if len(xids) > 0 {
		codes := map[int]int{}
		for _, x := range xids {
			codes[x.Xid]++
		}
		var cs []int
		for c := range codes {
			cs = append(cs, c)
		}
		sort.Ints(cs)
		desc := ""
		for i, c := range cs {
			if i > 0 {
				desc += ", "
			}
			desc += fmt.Sprintf("Xid %d ×%d", c, codes[c])
		}
		out = append(out, finding.Finding{
			ID: "gpu-xid", Severity: finding.Warning,
			Claim:    "The NVIDIA driver reported GPU errors: " + desc,
			Evidence: eventRows(v, xids, 8),
			Decision: "Look each Xid up in NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors): some are the application's fault (13, 31, 43: bad memory access or an illegal instruction in a kernel), others the hardware's (48, 63, 64, 74, 79, 94, 95: ECC, NVLink, bus).",
			// Sources: 004 (the evidence is in the kernel log)
			Subject: "host",
		})
	}
	for _, h := range hung {
		pid, _ := v.jobPIDOf(h.PID)
		out = append(out, finding.Finding{
			ID: "hung-task", Severity: finding.Warning, Supports: finding.Stalled,
			Claim:    fmt.Sprintf("The kernel's hung-task detector reported %s blocked in uninterruptible sleep for more than %s", v.procName(pid)+" "+v.threadName(h.PID), fmtSeconds(h.Blocked)),
			Evidence: eventRows(v, []kernlog.Event{h}, 1),
			Decision: "The thread waits on the kernel, not on the program: the stack printed after this line in `dmesg` names the file system or driver; check that storage (NFS, a FUSE mount, a failing disk).",
			// Sources: 004 (frozen jobs: the evidence is in the kernel)
			Subject: v.procName(pid),
		})
	}
	if len(other) > 0 {
		out = append(out, finding.Finding{
			ID: "host-oom-kill", Severity: finding.Info,
			Claim:    fmt.Sprintf("The OOM killer killed %s outside the job during the window: the host is short of memory", plural(len(other), "process", "processes")),
			Evidence: eventRows(v, other, 5),
			Decision: "Memory pressure on the host can take a rank next: check what else runs there and the job's own memory growth.",
			// Sources: 004 (The OOM killer)
			Subject: "host",
		})
	}
	return out
}

// inWindow says whether an event happened during the observed window.
func (v *view) inWindow(ev kernlog.Event) bool {
	if ev.Wall.IsZero() {
		return false
	}
	return !ev.Wall.Before(v.wall(v.t0)) && !ev.Wall.After(v.wall(v.t1))
}

// eventRows turns kernel lines into evidence, at most n (the latest).
func eventRows(v *view, evs []kernlog.Event, n int) []finding.Evidence {
	if len(evs) > n {
		evs = evs[len(evs)-n:]
	}
	rows := make([]finding.Evidence, 0, len(evs))
	for _, ev := range evs {
		what := string(ev.Kind)
		if ev.PID != 0 {
			what += " pid " + strconv.Itoa(ev.PID)
		}
		when := ""
		if !ev.Wall.IsZero() {
			when = "at " + ev.Wall.Format("2006-01-02 15:04:05")
		}
		rows = append(rows, finding.Evidence{What: what, Text: safe(ev.Raw), Window: when, Source: "kernel log"})
	}
	return rows
}

// kernelLogNotes says when the kernel log could not be read: without it a
// dead member can be seen to go but not why.
func kernelLogNotes(v *view) []finding.Finding {
	var out []finding.Finding
	for _, ev := range v.tl.Events {
		if ev.Kind == timeline.EventKernelLogCapped {
			out = append(out, finding.Finding{ID: "kernel-log-capped", Severity: finding.Info, Subject: "host",
				Claim:    "The kernel log read was capped, so the oldest lines since the job started were not matched: " + safe(ev.Text),
				Decision: "If a member died long ago, search the full log yourself (`journalctl -k --since ...`).",
				// Sources: 004 (the evidence is in the kernel log)
			})
		}
		if ev.Kind == timeline.EventKernelLogUnavailable {
			out = append(out, finding.Finding{ID: "kernel-log-not-visible", Severity: finding.Info, Subject: "host",
				Claim:    "The kernel log was not visible, so OOM kills, crashes and GPU errors could not be matched to the job: " + safe(ev.Text),
				Decision: "Run gpufeed as root or with CAP_SYSLOG (or set kernel.dmesg_restrict=0) to read the kernel log; meanwhile check `dmesg -T` yourself.",
				// Sources: 004 (the evidence is in the kernel log)
			})
		}
	}
	return out
}
