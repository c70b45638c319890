package frozen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// stalledFinding is the verdict-carrying finding: nothing progresses.
func stalledFinding(v *view, p Progress) finding.Finding {
	window := strconv.Itoa(p.Samples) + " samples over " + fmtSeconds(p.Span)
	if p.Since != "" {
		window += ", " + p.Since
	}
	ev := []finding.Evidence{
		{What: fmt.Sprintf("wake-ups of the job's %d live threads out of waits with no timeout (each is something arriving: data, a lock released, a synchronise returning)", p.Threads),
			Value: float64(p.Wakeups), Window: window, Source: "/proc/PID/task/TID/schedstat (times scheduled in)"},
		{What: fmt.Sprintf("CPU gained by all %d live threads of the job", p.Threads), Value: round(p.CPUCores*100, 3), Unit: "% of one core", Window: window, Source: cpuSource(p.Measure)},
		{What: "CPU of the busiest thread, " + v.procName(p.BusiestPID) + " " + v.threadName(p.BusiestTID), Value: round(p.BusiestCores*100, 3), Unit: "% of one core", Window: window, Source: cpuSource(p.Measure)},
	}
	if p.TimerWakeups > 0 {
		ev = append(ev, finding.Evidence{What: "wake-ups out of timed waits (their own timers: watchdogs, heartbeats; no sign of progress)", Value: float64(p.TimerWakeups),
			Window: window, Source: "/proc/PID/task/TID/schedstat, /proc/PID/task/TID/syscall"})
	}
	io := "I/O not visible"
	if p.IOVisible {
		ev = append(ev, finding.Evidence{What: "bytes read and written by the job (rchar + wchar, pipes and sockets included)", Value: round(p.IOBytesPerSec, 1), Unit: "B/s", Window: window, Source: "/proc/PID/io"})
		io = "moved " + strconv.FormatFloat(p.IOBytesPerSec, 'f', 0, 64) + " B/s of I/O"
	}
	ev = append(ev, gpuEvidence(v, p.Measure, window)...)
	gpu := "no GPU was visible"
	if p.GPUVisible {
		gpu = "the GPUs stayed idle"
		if p.GPUSpinning() {
			switch {
			case p.CompletionsVisible:
				gpu = fmt.Sprintf("the GPUs stayed at %.0f %% or more yet completed none of the job's work: a kernel spinning, such as a collective waiting for a peer that never arrives", p.GPUMinUtil)
			default:
				gpu = fmt.Sprintf("the GPUs stayed at %.0f %% or more while no thread waiting on them was woken: a collective kernel spinning on a peer that never arrives (this device does not report completed work; one kernel running longer than the window looks the same)", p.GPUMinUtil)
			}
		}
	}
	loud, _ := v.failLoudly()
	return finding.Finding{
		ID:       "job-stalled",
		Severity: finding.Critical,
		Claim: fmt.Sprintf("the job is stalled: none of its %d live threads was woken out of a wait with no timeout, they gained %.2f %% of one core, %s and %s over %s",
			p.Threads, p.CPUCores*100, io, gpu, fmtSeconds(p.Span)+sinceText(p)),
		Evidence: ev,
		Decision: "Nothing moves, so profiling cannot help: read the findings that follow (a member that died, where each thread waits). A frozen job is usually a dead rank whose peers wait in a collective forever: check the kernel log for kills (`dmesg -T | grep -i 'killed process'`), and " + loud + " so survivors fail loudly next time.",
		// Sources: 004 (The OOM killer; The NCCL hang)
		Supports: finding.Stalled,
		Subject:  "job",
	}
}

// gpuEvidence is what the device said about the job's work over a span:
// its highest (and, pinned, lowest) utilisation, the whole device's when
// another process shares it, the operations it completed for the job.
func gpuEvidence(v *view, m Measure, window string) []finding.Evidence {
	if !m.GPUVisible {
		return nil
	}
	src := v.tl.Meta.GPUSource
	if src == "" {
		src = "GPU samples"
	}
	whose := "GPU utilisation"
	if m.GPUPerProcess {
		whose = "GPU utilisation by the job's processes (the device's per-process share)"
	}
	ev := []finding.Evidence{{What: whose + ", highest sample (GPUs " + ints(m.GPUDevices) + ")", Value: round(m.GPUMaxUtil, 1), Unit: "%", Window: window, Source: src}}
	if m.GPUSpinning() {
		ev = append(ev, finding.Evidence{What: whose + ", lowest sample", Value: round(m.GPUMinUtil, 1), Unit: "%", Window: window, Source: src})
	}
	if m.GPUPerProcess && m.DeviceMaxUtil > m.GPUMaxUtil+thresholds.StallMaxGPUUtil {
		ev = append(ev, finding.Evidence{What: "the whole device's utilisation, highest sample: other processes' work on a shared GPU (a neighbour), not the job's", Value: round(m.DeviceMaxUtil, 1), Unit: "%", Window: window, Source: src})
	}
	if m.CompletionsVisible {
		ev = append(ev, finding.Evidence{What: "operations the device completed for the job", Value: float64(m.Completions), Window: window, Source: src + " (per-process completed operations)"})
	}
	return ev
}

func round(x float64, digits int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', digits, 64), 64)
	return v
}

func ints(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func sinceText(p Progress) string {
	if p.Since == "" {
		return ""
	}
	return " (" + p.Since + ")"
}

// childExits maps each pid to the times (last sample) at which its child
// processes were last seen before they exited.
func (v *view) childExits() map[int][]int64 {
	out := map[int][]int64{}
	for pid, p := range v.procs {
		if v.alive(pid) {
			continue
		}
		if t, ok := v.lastProcT[pid]; ok {
			out[p.PPID] = append(out[p.PPID], t)
		}
	}
	return out
}

// memberExits is childExits for the children sampled in two readings or
// more: members of the job, not a fork storm's children glimpsed once.
func (v *view) memberExits() map[int][]int64 {
	out := map[int][]int64{}
	for pid, p := range v.procs {
		if v.alive(pid) {
			continue
		}
		if t, ok := v.lastProcT[pid]; ok && t > p.FirstSeen {
			out[p.PPID] = append(out[p.PPID], t)
		}
	}
	return out
}

// reapedBetween says whether the readings [from, to) may hold the reaping
// of a child: the child was last seen before to, and no more than
// thresholds.ReapGrace before from. The parent wakes to reap it (and the kernel folds
// the child's I/O counters into the parent's) some time after its last
// sample: at once on a quiet host, a few readings later on a loaded one.
func reapedBetween(exits []int64, from, to int64) bool {
	for _, t := range exits {
		if t < to && t+int64(thresholds.ReapGrace) >= from {
			return true
		}
	}
	return false
}
