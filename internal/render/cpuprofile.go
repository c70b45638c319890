package render

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/profile"
)

// cpuProfileThreads is how many of the most sampled threads are shown.
const cpuProfileThreads = 8

// cpuProfile writes where each sampled thread's CPU went, by category,
// with the hottest symbol of each.
func (t *textWriter) cpuProfile(p *profile.CPUProfile) {
	if p == nil {
		return
	}
	t.printf("\nCPU PROFILE (share of each thread's CPU samples; cpu-clock at %d Hz on %d CPUs over %s",
		p.FrequencyHz, p.CPUs, time.Duration(p.WindowNS).Round(100*time.Millisecond))
	if p.Lost > 0 || p.Unresolved > 0 {
		t.printf("; %d samples lost, %d addresses no mapping held", p.Lost, p.Unresolved)
	}
	t.printf(")\n")
	if len(p.Threads) == 0 {
		t.printf("  no samples of the job's threads: none ran on a CPU\n")
		return
	}
	for i, th := range p.Threads {
		if i == cpuProfileThreads {
			t.printf("  (%d more threads)\n", len(p.Threads)-i)
			break
		}
		var parts []string
		for _, c := range profile.Categories {
			n := th.Categories[c]
			if n == 0 || float64(n)/float64(th.Samples) < 0.01 {
				continue
			}
			part := fmt.Sprintf("%s %.0f%%", c, 100*th.Share(c))
			if top, ok := th.TopIn(c); ok && top.Symbol != "" && c != profile.Kernel {
				part += fmt.Sprintf(" (%s in %s)", top.Symbol, top.File)
			} else if ok && c == profile.Other && top.File != "" {
				part += fmt.Sprintf(" (%s)", top.File)
			}
			parts = append(parts, part)
		}
		t.printf("  tid %d %s (pid %d): %d samples: %s\n", th.TID, th.Comm, th.PID, th.Samples, strings.Join(parts, ", "))
	}
}
