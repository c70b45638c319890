package judge

import (
	"slices"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// withQuota gives the trainer of a synthetic timeline a 0.6-CPU quota and
// cpu.stat readings on its slow ticks: throttledPer of every 10 periods
// throttled each second.
func withQuota(tl *timeline.Timeline, throttledPer uint64) {
	for k, p := range tl.Procs {
		if k.PID == 100 {
			p.Cgroup = &timeline.Cgroup{Mode: "v1", CPUVersion: 1, CPUQuotaUs: 60000, CPUPeriodUs: 100000, CPULimitAt: "/kubepods/pod1/c1", CPUPath: "/kubepods/pod1/c1"}
		}
	}
	n := uint64(0)
	for i := range tl.Ticks {
		for j := range tl.Ticks[i].Procs {
			ps := &tl.Ticks[i].Procs[j]
			if ps.PID == 100 && ps.FDs != nil { // a slow tick
				ps.Cgroup = &timeline.CgroupSample{CPU: &timeline.CgroupCPU{NrPeriods: 10 * n, NrThrottled: throttledPer * n, ThrottledNs: throttledPer * n * 40e6}}
				n++
			}
		}
	}
}

func quotaLoop() *synth {
	// A launch loop that runs 60 % and waits 40 % of every interval (the
	// wait is its throttled time), with the GPU idle 80 %.
	return &synth{n: 50, util: constF(20), procs: []*sProc{trainer(&sThread{cpu: constF(60), wait: constF(40)})}}
}

func TestCPUQuotaLeadsTheVerdict(t *testing.T) {
	s := quotaLoop()
	tl := s.timeline()
	withQuota(tl, 4)
	v, fs := judgeVF(tl, derive.New(tl))
	emitsOnlyItsIDs(NewInput(tl, derive.New(tl)))
	if v.Class != finding.SubmissionBound || len(v.Because) == 0 || v.Because[0] != "cpu-quota-throttled" {
		t.Fatalf("%s because %v: %s", v.Class, v.Because, v.Summary)
	}
	if !strings.Contains(v.Summary, "throttled in 40% of periods by its 0.6-CPU limit (cgroup /kubepods/pod1/c1)") || !strings.Contains(v.Decision, "static CPU manager") {
		t.Errorf("summary %q decision %q", v.Summary, v.Decision)
	}
	if d := findingByID(fs, "launch-thread-descheduled"); d == nil || d.Severity != finding.Info || !strings.Contains(d.Claim, "its own cgroup's 0.6-CPU limit") {
		t.Errorf("descheduled: %+v", d)
	}
}

// The same loop with no GPU in view: the limit is said, and neither it nor
// the descheduled launch thread claims the GPU stayed busy; both say it is
// not known (a 0.2-CPU limit attached without a GPU once claimed "the
// launch queue absorbed it (the GPU stayed busy)").
//
// Where the process holds no device open either, nothing says which thread
// launches work: the claims call the main thread the one taken as the
// launch thread, and why (attached to a Python job with no GPU, a sleeping
// main thread was "the launch thread" while another thread spun).
func TestCPUQuotaWithoutAGPUClaimsNothingOfIt(t *testing.T) {
	for _, holdsDevice := range []bool{true, false} {
		s := quotaLoop()
		s.noGPU = true
		if !holdsDevice {
			s.procs[0].channels = nil
		}
		tl := s.timeline()
		withQuota(tl, 4)
		_, fs := judgeVF(tl, derive.New(tl))
		for _, id := range []string{"cpu-quota-throttled", "launch-thread-descheduled"} {
			f := findingByID(fs, id)
			if f == nil {
				t.Errorf("holds a device %v: no %s", holdsDevice, id)
				continue
			}
			if strings.Contains(f.Claim, "stayed busy") || !strings.Contains(f.Claim, "no GPU utilisation was seen, so whether the GPU waited for it is not known") {
				t.Errorf("%s without a GPU in view: %s", id, f.Claim)
			}
			want := "the launch thread python3 (pid 100, main thread) "
			if !holdsDevice {
				want = "python3 (pid 100, main thread), taken as the launch thread (no process of the job was seen using a GPU), "
			}
			if !strings.HasPrefix(f.Claim, want) {
				t.Errorf("holds a device %v: %s begins %q, want %q", holdsDevice, id, f.Claim, want)
			}
		}
	}
}

// A job with no GPU in view whose main thread sleeps while another spins
// against the limit: the line says what the limit costs the job (its
// demand against the limit), not what it costs a GPU it never saw.
func TestCPUQuotaWithoutAGPUOnASleepingMainThread(t *testing.T) {
	s := &synth{n: 50, noGPU: true, util: constF(0), procs: []*sProc{trainer(&sThread{cpu: constF(0), wait: constF(0)},
		&sThread{tid: 101, comm: "python3", cpu: constF(50), wait: constF(50)})}}
	s.procs[0].channels = nil
	tl := s.timeline()
	withQuota(tl, 9)
	_, fs := judgeVF(tl, derive.New(tl))
	f := findingByID(fs, "cpu-quota-throttled")
	if f == nil {
		t.Fatal("no cpu-quota-throttled")
	}
	if f.Severity != finding.Info || strings.Contains(f.Claim, "costs the GPU little") ||
		!strings.Contains(f.Claim, "; what the limit costs a GPU is not known, but the job's threads wanted 1 CPU (running or waiting to run) against the 0.6 it gives") {
		t.Errorf("%s: %s", f.Severity, f.Claim)
	}
}

// The same loop whose cgroup was throttled in 1 of 10 periods (a host so
// busy the job never reaches its quota): the limit is not blamed.
func TestCPUQuotaRarelyThrottledIsNotBlamed(t *testing.T) {
	s := quotaLoop()
	tl := s.timeline()
	withQuota(tl, 1)
	v, fs := judgeVF(tl, derive.New(tl))
	if findingByID(fs, "cpu-quota-throttled") != nil || (len(v.Because) > 0 && v.Because[0] == "cpu-quota-throttled") {
		t.Errorf("a quota throttling 10%% of periods blamed: %s %v", v.Summary, v.Because)
	}
	// And without any cgroup readings (an old recording): no finding.
	tl = quotaLoop().timeline()
	if _, fs := judgeVF(tl, derive.New(tl)); findingByID(fs, "cpu-quota-throttled") != nil {
		t.Error("cpu-quota-throttled without cgroup readings")
	}
}

// A cgroup throttled in 8 of 10 periods whose launch thread was held off a
// CPU only 3 % of the time (it slept through most throttled spells): the
// limit is said, as information that it binds, and leads nothing.
func TestCPUQuotaThrottlingThatCostsLittleIsInformation(t *testing.T) {
	s := &synth{n: 50, util: constF(20), procs: []*sProc{trainer(&sThread{cpu: constF(60), wait: constF(3)})}}
	tl := s.timeline()
	withQuota(tl, 8)
	v, fs := judgeVF(tl, derive.New(tl))
	f := findingByID(fs, "cpu-quota-throttled")
	if f == nil {
		t.Fatalf("no cpu-quota-throttled for a cgroup throttled in 80%% of periods; verdict %s: %s", v.Class, v.Summary)
	}
	if f.Severity != finding.Info || f.Supports != "" || !strings.Contains(f.Claim, "throttled in 80% of periods by its 0.6-CPU limit") ||
		!strings.Contains(f.Claim, "not what idles it now") {
		t.Errorf("finding %v supports %q: %s", f.Severity, f.Supports, f.Claim)
	}
	if slices.Contains(v.Because, "cpu-quota-throttled") || strings.Contains(v.Summary, "CPU limit") {
		t.Errorf("a limit costing the launch thread 3%% named in the verdict: %s because %v", v.Summary, v.Because)
	}
	// At 40 % of its time held off a CPU it leads (TestCPUQuotaLeadsTheVerdict).
}

// A launch thread its 0.6-CPU limit throttles in 9 of 10 periods, running
// 12 % of every interval and waiting for a CPU 60 %, whose few samples
// fall in the interpreter (its loop's own Python, nothing launched for
// long): what it did while running does not explain an idle GPU it was
// kept off a CPU for five times as long. The limit leads; the CPU split
// names nothing. Built from a real run: the sync loop under a 0.1-CPU
// limit was judged preprocessing-bound from 41 samples, 85 % of them in
// the interpreter. The same profile on a thread that ran more than it
// waited still names preprocessing (its own work comes first there).
func TestCPUQuotaThrottledThreadsProfileNamesNoClass(t *testing.T) {
	for _, tc := range []struct {
		cpu, wait float64
		want      finding.Class
		lead      string
	}{
		{12, 60, finding.SubmissionBound, "cpu-quota-throttled"},
		{60, 35, finding.Preprocessing, "launch-thread-cpu-split"},
	} {
		s := &synth{n: 50, util: constF(25), procs: []*sProc{trainer(&sThread{cpu: constF(tc.cpu), wait: constF(tc.wait)})}}
		tl := s.timeline()
		withQuota(tl, 9)
		in := NewInput(tl, derive.New(tl))
		th := in.Job.Launch.T
		tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 5e9,
			Threads: []profile.ThreadCPU{{PID: th.PID, TID: th.Key.TID, Samples: 41,
				Categories: map[profile.Category]int{profile.Interpreter: 35, profile.Kernel: 3, profile.DriverSync: 2, profile.DriverLaunch: 1},
				Top:        []profile.SymbolSamples{{Symbol: "_PyEval_EvalFrameDefault", File: "libpython3.11.so.1.0", Category: profile.Interpreter, Samples: 35}}}}}
		v, fs := judgeVF(tl, derive.New(tl))
		if v.Class != tc.want || len(v.Because) == 0 || v.Because[0] != tc.lead {
			t.Errorf("running %.0f%%, waiting %.0f%%: %s because %v, want %s led by %s: %s", tc.cpu, tc.wait, v.Class, v.Because, tc.want, tc.lead, v.Summary)
		}
		if f := findingByID(fs, "launch-thread-cpu-split"); tc.want == finding.SubmissionBound && f != nil {
			t.Errorf("running %.0f%%, waiting %.0f%%: the split of its running time judged: %s", tc.cpu, tc.wait, f.Claim)
		}
	}
}
