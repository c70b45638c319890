package sample

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/testjob"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// A spinning process in a real cgroup v1 cpu cgroup limited to 0.2 CPU: the
// slow tier records the limit and cpu.stat's throttling, which grows over
// the window in most periods.
func TestLiveCgroupThrottlingSampled(t *testing.T) {
	livetest.Need(t)
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
	before := readCPUStat(t, cg.Dir)
	tl, _ := sampleLive(t, pid, 2500*time.Millisecond)
	after := readCPUStat(t, cg.Dir)
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
	t.Logf("periods %d, throttled %d (the kernel's own reads around the window: %v then %v)", dp, dt, before, after)
	// What was sampled lies between the kernel's counters read just before
	// and just after the window, and grew over it. How many periods a
	// spinner is throttled in depends on the host's load (on a saturated
	// host it gets less than its 0.2-CPU quota in many periods), so only
	// that some were is asked.
	if periods0 < before["nr_periods"] || periods1 > after["nr_periods"] || *first < before["nr_throttled"] || *last > after["nr_throttled"] {
		t.Errorf("sampled periods %d..%d, throttled %d..%d: outside the kernel's %v .. %v", periods0, periods1, *first, *last, before, after)
	}
	if dp < 10 || dt == 0 || dt > dp {
		t.Errorf("throttled in %d of %d periods: want some of at least 10", dt, dp)
	}
}

// readCPUStat reads a v1 cgroup's cpu.stat (nr_periods, nr_throttled,
// throttled_time) as the kernel gives it.
func readCPUStat(t *testing.T, dir string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]uint64{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("%s/cpu.stat: %q: %v", dir, l, err)
			}
			m[k] = n
		}
	}
	return m
}
