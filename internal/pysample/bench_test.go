package pysample

import (
	"os"
	"testing"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

// BenchmarkStacks: one sampling pass (every thread's stack) over the
// benchmark target, scripts/bench/pytarget.py (one busy thread 30 frames
// deep, 8 idle), run by GPUFEED_BENCH_PYTHON (default Debian's python3).
// scripts/bench-pystacks.sh reports it beside the target's throughput.
func BenchmarkStacks(b *testing.B) {
	py := os.Getenv("GPUFEED_BENCH_PYTHON")
	if py == "" {
		py = "/usr/bin/python3"
	}
	if _, err := os.Stat(py); err != nil {
		b.Skipf("%s: %v", py, err)
	}
	k := startBench(b, py)
	tg, err := Open(procfs.At("/proc", "/sys"), k)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	frames := 0
	for b.Loop() {
		st, _, err := tg.Stacks()
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range st {
			frames += len(s.Frames)
		}
	}
	b.ReportMetric(float64(frames)/float64(b.N), "frames/op")
	b.ReportMetric(float64(tg.Reads())/float64(b.N), "reads/op")
}

func startBench(b *testing.B, py string) int {
	b.Helper()
	cmd := execCommand(py, "../../scripts/bench/pytarget.py")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitThreads(cmd.Process.Pid, 10)
	return cmd.Process.Pid
}
