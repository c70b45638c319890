package check

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A job of three threads in a v1 cgroup limited to 0.5 CPU (the kernel
// documentation's formats): check --pid shows the quota in CPUs, the
// cpuset, the memory and pids limits beside the host's, and warns that the
// quota is below its busy threads (running or runnable over the window).
func TestCgroupLimitsQuotaBelowBusyThreads(t *testing.T) {
	files := map[string]string{
		"proc/self/mountinfo": "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n" +
			"34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n" +
			"35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
			"39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n",
		"proc/4242/cgroup":                               "8:pids:/job\n4:memory:/job\n3:cpuset:/job\n1:cpu:/job\n",
		"proc/4242/task/4242/schedstat":                  "0 0 0\n",
		"proc/4242/task/4243/schedstat":                  "0 0 0\n",
		"proc/4242/task/4244/schedstat":                  "0 0 0\n",
		"proc/4242/task/4245/schedstat":                  "0 0 0\n",
		"proc/meminfo":                                   "MemTotal:       16384000 kB\nMemAvailable:    8000000 kB\n",
		"sys/fs/cgroup/cpu/job/cpu.cfs_quota_us":         "50000\n",
		"sys/fs/cgroup/cpu/job/cpu.cfs_period_us":        "100000\n",
		"sys/fs/cgroup/cpu/job/cpu.stat":                 "nr_periods 10\nnr_throttled 0\nthrottled_time 0\n",
		"sys/fs/cgroup/cpuset/job/cpuset.effective_cpus": "0-3\n",
		"sys/fs/cgroup/memory/job/memory.limit_in_bytes": "1610612736\n",
		"sys/fs/cgroup/memory/job/memory.usage_in_bytes": "1073741824\n",
		"sys/fs/cgroup/pids/job/pids.max":                "512\n",
		"sys/fs/cgroup/pids/job/pids.current":            "40\n",
	}
	root := tree(t, files, nil)
	opts := Options{PID: 4242, Window: time.Second, ProcRoot: filepath.Join(root, "proc"), SysRoot: filepath.Join(root, "sys")}
	e := newEnv(context.Background(), opts)
	e.firstReadings()
	time.Sleep(100 * time.Millisecond)
	// Three threads ran or waited for a CPU the whole window; one slept.
	for _, tid := range []string{"4242", "4243", "4244"} {
		if err := os.WriteFile(filepath.Join(root, "proc/4242/task", tid, "schedstat"), []byte("50000000 60000000 9\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "sys/fs/cgroup/cpu/job/cpu.stat"), []byte("nr_periods 20\nnr_throttled 9\nthrottled_time 500000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.secondReadings()
	r := want(t, cgroupLimitsCheck.outcomes(e), "cgroup-limits", "pid 4242", Warn)
	if !strings.Contains(r.Claim, "0.5 CPUs, below its 3 busy threads") {
		t.Errorf("claim %q", r.Claim)
	}
	got := map[string]string{}
	for _, ev := range r.Evidence {
		got[ev.What] = strings.TrimSpace(ev.Text + " " + ftoa(ev.Value))
	}
	for what, v := range map[string]string{"CPU quota": "0.5", "cpuset (effective)": "0-3 (4 CPUs) 0", "memory limit": "1536",
		"pids limit": "512", "tasks in the cgroup": "40", "periods throttled over the window": "90", "host memory (MemTotal)": "16000"} {
		if got[what] != v {
			t.Errorf("%s: %q, want %q (all: %v)", what, got[what], v, got)
		}
	}
	// Without a window the busy threads are not known: no warning.
	opts.Window = 0
	e = newEnv(context.Background(), opts)
	e.firstReadings()
	e.secondReadings()
	want(t, cgroupLimitsCheck.outcomes(e), "cgroup-limits", "pid 4242", OK)
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
