package rules

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/rules/thresholds"
)

func init() {
	register(Rule{ID: "no-progress", Title: "Nothing progresses: no CPU, no GPU, no I/O (stalled)",
		Seed: "004; issue 7", Run: runStalled})
}

// runStalled is the basic stalled detection: over a full window, the job's
// threads together gained less than StalledCPUPct of a core, no interval had
// GPU activity, and the job moved less than StalledIOBytesPerSec. Frozen-job
// triage (who died, where each thread waits and why) deepens it.
func runStalled(in *Input) []finding.Finding {
	a := in.A
	if time.Duration(a.WindowNS) < thresholds.MinWindow || len(a.Intervals) < thresholds.MinIntervals {
		return nil
	}
	alive := 0
	for _, p := range in.Job.Procs {
		if !p.Info.Exited {
			alive++
		}
	}
	if alive == 0 {
		return nil // the job ended: nothing to progress
	}
	var cpu float64
	cpuN := 0
	for i := range a.Intervals {
		sum, k := 0.0, 0
		for _, p := range in.Job.Procs {
			if v := p.CPUPct[i]; !math.IsNaN(v) {
				sum += v
				k++
			}
		}
		if k > 0 {
			cpu += sum
			cpuN++
		}
	}
	if cpuN == 0 {
		return nil
	}
	cpu /= float64(cpuN)
	gpuMax := in.Job.GPUUtil.Stats().Max
	io, ioOK := jobIORate(in)
	if cpu >= thresholds.StalledCPUPct || (!math.IsNaN(gpuMax) && gpuMax >= thresholds.StalledGPUUtilPct) ||
		(ioOK && io >= thresholds.StalledIOBytesPerSec) {
		return nil
	}
	f := finding.Finding{
		ID: "no-progress", Severity: finding.Critical, Supports: finding.Stalled,
		Seed:  "004 (frozen jobs: dead ranks, blocked threads); issue 7",
		Claim: fmt.Sprintf("nothing progresses: over %.1f s the job's %s used %.2f%% of one core in all, the GPU ran no kernel, and no data moved", float64(a.WindowNS)/1e9, plural(alive, "process", "processes"), cpu),
	}
	f.Evidence = append(f.Evidence, ev("the job's threads running, summed", cpu, "% of one core", in.window(cpuN), "schedstat of every thread of the job"))
	if math.IsNaN(gpuMax) {
		f.Evidence = append(f.Evidence, evText("GPU utilisation", "not read ("+in.gpuSource()+")", "", in.gpuSource()))
	} else {
		f.Evidence = append(f.Evidence, ev("GPU utilisation, highest interval", gpuMax, "%", in.window(in.Attr.Measured), in.utilSource()))
	}
	if ioOK {
		f.Evidence = append(f.Evidence, ev("bytes the job read and wrote", io, "B/s", "over the window", "/proc/PID/io rchar, wchar"))
	}
	if w := whereThreadsWait(in, 4); w != "" {
		f.Evidence = append(f.Evidence, evText("where the job's threads wait", w, "last reading of each thread", "/proc/PID/task/TID/{stat,syscall,wchan}, /proc/PID/fd"))
	}
	f.Decision = "Find what it waits for: the blocked threads (a lock, a pipe or socket whose other end is gone or stuck), a member that died (the kernel log: OOM killer, " +
		"segfault, GPU Xid), a collective waiting for a dead rank; get Python stacks with py-spy dump --pid, and set NCCL/torch.distributed timeouts so a hang becomes an error (004)."
	return []finding.Finding{f}
}

// jobIORate is the job's rchar + wchar per second over the window.
func jobIORate(in *Input) (float64, bool) {
	total, ok := 0.0, false
	for _, p := range in.Job.Procs {
		first, last := -1, -1
		for i := range in.TL.Ticks {
			if s := p.Sample(i); s != nil && s.IO != nil {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if first < 0 || last <= first {
			continue
		}
		a, b := p.Sample(first).IO, p.Sample(last).IO
		dt := float64(in.A.TickT[last]-in.A.TickT[first]) / 1e9
		if dt <= 0 || b.RChar < a.RChar || b.WChar < a.WChar {
			continue
		}
		total += float64(b.RChar-a.RChar+b.WChar-a.WChar) / dt
		ok = true
	}
	return total, ok
}

// whereThreadsWait summarises the last known wait of the job's threads:
// "read on pipe:[12] ×3; futex ×2".
func whereThreadsWait(in *Input, max int) string {
	counts := map[string]int{}
	for _, p := range in.Job.Procs {
		channels, _ := channelSet(p)
		for _, th := range p.Threads {
			b, _ := th.LastBlocked()
			last, _ := th.Last()
			if last == nil {
				continue
			}
			counts[describeWait(last.State, b, channels)]++
		}
	}
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range counts {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].n != all[j].n {
			return all[i].n > all[j].n
		}
		return all[i].k < all[j].k
	})
	var parts []string
	for i, x := range all {
		if i == max {
			break
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", x.k, x.n))
	}
	return strings.Join(parts, "; ")
}
