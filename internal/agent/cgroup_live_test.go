package agent

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// The launch-bound scenario in a real cgroup v1 cpu cgroup limited to 0.2
// CPU: the agent exports the limit and the cgroup's throttling under the
// cAdvisor-mirroring names.
func TestAgentExportsCgroupThrottling(t *testing.T) {
	cg, err := testjob.NewCPUCgroup("gpufeed-test-agent", 20000, 100000)
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cg.Remove(); err != nil {
			t.Error(err)
		}
	}()
	run := startScenario(t, "launch-bound")
	if err := cg.Add(run.PID); err != nil {
		t.Fatal(err)
	}
	src, err := sim.Dial(run.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := testConfig(t)
	cfg.GPU, cfg.GPUName = src, src.Name()
	a, _ := startAgent(t, cfg)
	waitWindows(t, a, run.PID, 2, 60*time.Second)
	labels := map[string]string{"pid": strconv.Itoa(run.PID)}
	one := func(name string) float64 {
		s := series(t, a, name, labels)
		if len(s) != 1 {
			t.Fatalf("%s: %d series, want 1", name, len(s))
		}
		return value(s[0])
	}
	if q := one("gpufeed_cgroup_cpu_quota_cpus"); q != 0.2 {
		t.Errorf("quota %v CPUs, want 0.2", q)
	}
	p, th, secs := one("gpufeed_cgroup_cpu_periods_total"), one("gpufeed_cgroup_cpu_throttled_periods_total"), one("gpufeed_cgroup_cpu_throttled_seconds_total")
	t.Logf("periods %v, throttled %v, throttled %.2f s", p, th, secs)
	if p < 10 || th < 0.5*p || secs <= 0 {
		t.Errorf("periods %v, throttled %v (%.2f s): want most periods throttled", p, th, secs)
	}
	if u := one("gpufeed_cgroup_memory_usage_bytes"); u <= 0 {
		t.Errorf("memory usage %v", u)
	}
}
