package check

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

const (
	// irqConcentrationWarn: one CPU taking more than half of all device
	// interrupts on a machine of four CPUs or more means interrupts are not
	// spread (no irqbalance, or every IRQ steered to one CPU).
	irqConcentrationWarn    = 0.5
	irqConcentrationMinCPUs = 4
	// irqHotFactor: a CPU taking more than twice its fair share of device
	// interrupts is one the launch thread should avoid (000 §9).
	irqHotFactor = 2.0
	// irqMinDelta: below this many interrupts in the window, the counts
	// since boot say more than the window.
	irqMinDelta = 1000
)

var cpuIRQCheck = Check{
	ID:    "cpu-irq",
	Title: "Which CPUs take the device interrupts, and whether the launch thread runs there",
	// Sources: 000 §9
	run: runCPUIRQ,
}

type irqShare struct {
	cpu   int
	count uint64
	share float64
}

func runCPUIRQ(e *env) []Outcome {
	if e.irqErr != nil {
		return []Outcome{readFailure("", "interrupt counts", procFile("interrupts"), e.irqErr, "a procfs", "read access to /proc")}
	}
	before, after := e.irq0.DevicePerCPU(), e.irq1.DevicePerCPU()
	window := e.irqAt1.Sub(e.irqAt0)
	counts := after
	var delta uint64
	for cpu, n := range after {
		if n >= before[cpu] {
			delta += n - before[cpu]
		}
	}
	if window > 0 && delta >= irqMinDelta {
		counts = map[int]uint64{}
		for cpu, n := range after {
			if n >= before[cpu] {
				counts[cpu] = n - before[cpu]
			}
		}
	} else {
		window = 0
	}
	shares, total := rankIRQ(counts)
	if total == 0 {
		return []Outcome{{Status: OK, Claim: "no device interrupts counted", Evidence: []finding.Evidence{num("device interrupts", 0, "", procFile("interrupts"))}}}
	}
	src := procFile("interrupts")
	ev := []finding.Evidence{{What: "device interrupts, all CPUs", Value: float64(total), Window: since(window), Source: src}}
	if e.irqTruncated {
		ev = append(ev, text("note", fmt.Sprintf("larger than %d MiB: counted the first part only", procfs.DefaultMaxRead>>20), src))
	}
	for i, s := range shares {
		if i == 3 {
			break
		}
		ev = append(ev, finding.Evidence{What: fmt.Sprintf("CPU %d share of device interrupts", s.cpu), Value: s.share * 100, Unit: "%",
			Window: since(window), Source: src + " (top: " + topDevices(e.irq1, s.cpu) + ")"})
	}
	fair := 1 / float64(len(shares))
	top := shares[0]
	if e.opts.PID > 0 {
		th, err := e.mainThreadStatus()
		if allowed, have := th.CPUsAllowed(); err == nil && have {
			ev = append(ev, text("launch (main) thread allowed CPUs", allowed.String(), procFile(pidDir(e.opts.PID), "task", pidDir(e.opts.PID), "status")))
			if last, err := e.fs.LastCPU(e.opts.PID, e.opts.PID); err == nil {
				ev = append(ev, num("launch (main) thread last ran on CPU", float64(last), "", procFile(pidDir(e.opts.PID), "task", pidDir(e.opts.PID), "stat")))
			}
			if len(allowed) <= pinnedCPUsMax {
				for _, s := range shares {
					if allowed.Contains(s.cpu) && s.share > irqHotFactor*fair {
						return []Outcome{{Status: Warn, Subject: e.subjectPID(), Evidence: ev, Supports: finding.SubmissionBound,
							Claim: fmt.Sprintf("launch thread is pinned to CPU %d, which takes %.0f%% of device interrupts (%.1fx its fair share)", s.cpu, s.share*100, s.share/fair),
							Decision: fmt.Sprintf("Steer device IRQs off the launch thread's CPUs (/proc/irq/N/smp_affinity_list, irqbalance "+
								"--banirq or IRQBALANCE_BANNED_CPULIST=%s), to a housekeeping core on the device's NUMA node.", allowed)}}
					}
				}
				return []Outcome{{Status: OK, Subject: e.subjectPID(), Evidence: ev,
					Claim: fmt.Sprintf("launch thread pinned to CPUs %s, none of which takes more than %.0fx its fair share of device interrupts (the busiest, CPU %d, takes %.0f%%)",
						allowed, irqHotFactor, top.cpu, top.share*100)}}
			}
		}
	}
	if len(shares) >= irqConcentrationMinCPUs && top.share > irqConcentrationWarn {
		return []Outcome{{Status: Warn, Evidence: ev,
			Claim:    fmt.Sprintf("CPU %d takes %.0f%% of all device interrupts", top.cpu, top.share*100),
			Decision: "Spread interrupts (irqbalance, or per-queue IRQ affinity) and keep launch threads off that CPU."}}
	}
	claim := fmt.Sprintf("device interrupts spread: the busiest CPU (%d) takes %.0f%%", top.cpu, top.share*100)
	if len(shares) < irqConcentrationMinCPUs {
		claim = fmt.Sprintf("the busiest CPU (%d) takes %.0f%% of device interrupts; with %d CPUs there is nowhere else to put them", top.cpu, top.share*100, len(shares))
	}
	return []Outcome{{Status: OK, Evidence: ev, Subject: subjectIf(e), Claim: claim}}
}

func subjectIf(e *env) string {
	if e.opts.PID > 0 {
		return e.subjectPID()
	}
	return ""
}

func rankIRQ(counts map[int]uint64) ([]irqShare, uint64) {
	var total uint64
	for _, n := range counts {
		total += n
	}
	out := make([]irqShare, 0, len(counts))
	for cpu, n := range counts {
		s := 0.0
		if total > 0 {
			s = float64(n) / float64(total)
		}
		out = append(out, irqShare{cpu, n, s})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].count != out[j].count {
			return out[i].count > out[j].count
		}
		return out[i].cpu < out[j].cpu
	})
	return out, total
}

// topDevices names the two device lines with the most interrupts on cpu.
func topDevices(irq procfs.Interrupts, cpu int) string {
	col := -1
	for i, c := range irq.CPUs {
		if c == cpu {
			col = i
		}
	}
	type dev struct {
		name string
		n    uint64
	}
	var devs []dev
	for _, l := range irq.Lines {
		if !l.Device || col < 0 || col >= len(l.Counts) || l.Counts[col] == 0 {
			continue
		}
		f := strings.Fields(l.Desc)
		name := "irq " + l.Name
		if len(f) > 0 {
			name = f[len(f)-1]
		}
		devs = append(devs, dev{name, l.Counts[col]})
	}
	sort.Slice(devs, func(i, j int) bool {
		if devs[i].n != devs[j].n {
			return devs[i].n > devs[j].n
		}
		return devs[i].name < devs[j].name
	})
	var names []string
	for i, d := range devs {
		if i == 2 {
			break
		}
		names = append(names, d.name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
