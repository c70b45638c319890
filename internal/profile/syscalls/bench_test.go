//go:build amd64 || arm64

package syscalls

import (
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkSyscallOverhead measures what counting costs a syscall-heavy
// job, side by side with strace -c -f and perf trace -s: dd copying
// GPUFEED_BENCH_BYTES (default 2 MB) one byte at a time (a read and a write
// per byte), run plain, under the summary (this process watched, dd
// followed as its child), under strace -c -f and under perf trace -s, in
// rotating rounds so the host's load falls on all alike. It reports the
// median wall time of each and the slowdowns. perf trace mounts tracefs
// when it is not: it is unmounted again after. scripts/bench-bpf.sh runs
// it; docs/PERFORMANCE.md has the numbers.
func BenchmarkSyscallOverhead(b *testing.B) {
	if err := Check(""); err != nil {
		b.Skip(err)
	}
	n := os.Getenv("GPUFEED_BENCH_BYTES")
	if n == "" {
		n = "2000000"
	}
	dd := []string{"dd", "if=/dev/zero", "of=/dev/null", "bs=1", "count=" + n}
	tracefs := mounted("/sys/kernel/tracing")
	defer func() {
		if !tracefs && mounted("/sys/kernel/tracing") {
			exec.Command("umount", "/sys/kernel/tracing").Run()
		}
	}()
	run := func(argv ...string) time.Duration {
		start := time.Now()
		c := exec.Command(argv[0], argv[1:]...)
		if out, err := c.CombinedOutput(); err != nil {
			b.Fatalf("%v: %v\n%s", argv, err, out)
		}
		return time.Since(start)
	}
	modes := []string{"plain", "summary", "strace -c -f", "perf trace -s"}
	times := map[string][]time.Duration{}
	var counted uint64
	for i := 0; i < max(b.N, 5); i++ {
		for _, m := range modes {
			switch m {
			case "plain":
				times[m] = append(times[m], run(dd...))
			case "summary":
				t, err := Start([]int{os.Getpid()}, Options{})
				if err != nil {
					b.Fatal(err)
				}
				times[m] = append(times[m], run(dd...))
				s := t.Stop()
				for _, th := range s.Threads {
					if th.PID != os.Getpid() {
						counted += th.Stat("read").Calls
					}
				}
			case "strace -c -f":
				if _, err := exec.LookPath("strace"); err != nil {
					continue
				}
				times[m] = append(times[m], run(append([]string{"strace", "-c", "-f", "-o", "/dev/null"}, dd...)...))
			case "perf trace -s":
				if _, err := exec.LookPath("perf"); err != nil {
					continue
				}
				times[m] = append(times[m], run(append([]string{"perf", "trace", "-s", "-o", "/dev/null"}, dd...)...))
			}
		}
	}
	base := median(times["plain"])
	var lines []string
	for _, m := range modes {
		if len(times[m]) == 0 {
			continue
		}
		md := median(times[m])
		unit := strings.ReplaceAll(m, " ", "_")
		b.ReportMetric(md.Seconds(), "s-"+unit)
		if m != "plain" {
			b.ReportMetric(100*(md.Seconds()-base.Seconds())/base.Seconds(), "%slowdown-"+unit)
		}
		lines = append(lines, m+": "+md.Round(time.Millisecond).String()+" "+strconv.Quote(durations(times[m])))
	}
	want, _ := strconv.Atoi(n)
	b.Logf("%s\nreads counted under the summary: %d (dd made %d per run)", strings.Join(lines, "\n"), counted, want+1)
}

func median(v []time.Duration) time.Duration {
	s := append([]time.Duration(nil), v...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func durations(v []time.Duration) string {
	var p []string
	for _, d := range v {
		p = append(p, d.Round(time.Millisecond).String())
	}
	return strings.Join(p, " ")
}

func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[1] == dir {
			return true
		}
	}
	return false
}
