package sample

import (
	"errors"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/testjob"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// A spinning process in a real cgroup v1 cpu cgroup limited to 0.2 CPU: the
// slow tier records the limit and cpu.stat's throttling, which grows over
// the window in most periods.
func TestLiveCgroupThrottlingSampled(t *testing.T) {
	cg, err := testjob.NewCPUCgroup("gpufeed-test-sample", 20000, 100000)
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
	pid, _ := startLoad(t, "spin-sleep")
	if err := cg.Add(pid); err != nil {
		t.Fatal(err)
	}
	tl, _ := sampleLive(t, pid, 2500*time.Millisecond)
	var info *timeline.ProcInfo
	for k, p := range tl.Procs {
		if k.PID == pid {
			info = p
		}
	}
	if info == nil || info.Cgroup == nil {
		t.Fatalf("no cgroup facts: %+v", info)
	}
	c := info.Cgroup
	if c.CPUQuotaUs != 20000 || c.CPUPeriodUs != 100000 || c.CPULimit() != 0.2 || c.CPULimitAt != cg.Path || c.CPUPath != cg.Path || c.CPUVersion != 1 {
		t.Errorf("limit %+v, want 20000/100000 at %s", c, cg.Path)
	}
	var first, last *uint64
	var periods0, periods1 uint64
	for _, tk := range tl.Ticks {
		for _, ps := range tk.Procs {
			if ps.PID == pid && ps.Cgroup != nil && ps.Cgroup.CPU != nil {
				v := ps.Cgroup.CPU.NrThrottled
				if first == nil {
					first, periods0 = &v, ps.Cgroup.CPU.NrPeriods
				}
				last, periods1 = &v, ps.Cgroup.CPU.NrPeriods
			}
		}
	}
	if first == nil || last == nil {
		t.Fatal("no cpu.stat sampled")
	}
	dp, dt := periods1-periods0, *last-*first
	t.Logf("periods %d, throttled %d", dp, dt)
	// A spinner against a 0.2-CPU quota is throttled in nearly every
	// period it runs in.
	if dp < 10 || float64(dt) < 0.7*float64(dp) {
		t.Errorf("throttled in %d of %d periods: want most", dt, dp)
	}
}
