package demo

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
)

func TestScenariosDefaultFirstAndComplete(t *testing.T) {
	all := Scenarios()
	if all[0].Name != Default {
		t.Errorf("first scenario %q, want the default %q", all[0].Name, Default)
	}
	classes := map[finding.Class]bool{}
	for _, s := range all {
		classes[s.Expect] = true
		if (s.Python == "") == (s.Go == "") {
			t.Errorf("%s: want exactly one of a Python script and a Go workload", s.Name)
		}
		if s.Python != "" {
			if _, err := pyFiles.ReadFile("py/" + s.Python); err != nil {
				t.Errorf("%s: script %s not embedded: %v", s.Name, s.Python, err)
			}
		}
		if s.Go != "" && s.Go != "oversubscribed" {
			t.Errorf("%s: Go workload %q unknown to RunWorkload", s.Name, s.Go)
		}
	}
	for _, c := range finding.Classes {
		if c != finding.Inconclusive && !classes[c] {
			t.Errorf("no scenario produces %s", c)
		}
	}
	// The default is named after its verdict; its former name, which
	// scripts may use, still runs it.
	if s, err := Lookup(Default); err != nil || s.Name != "submission-bound" || s.Expect != finding.SubmissionBound {
		t.Errorf("default %s: %+v, %v", Default, s, err)
	}
	if s, err := Lookup("launch-bound"); err != nil || s.Name != "submission-bound" {
		t.Errorf("launch-bound: %+v, %v; want the submission-bound scenario", s, err)
	}
	if a := Aliases("submission-bound"); len(a) != 1 || a[0] != "launch-bound" {
		t.Errorf("aliases of submission-bound: %v", a)
	}
	if _, err := Lookup("nope"); err == nil || !strings.Contains(err.Error(), "--list") {
		t.Errorf("unknown scenario: %v", err)
	}
}

func TestCheck(t *testing.T) {
	s, _ := Lookup("noisy-neighbour")
	v := &finding.Verdict{Class: finding.SubmissionBound}
	if p := s.Check(v, []finding.Finding{{ID: "launch-thread-descheduled"}}, true); p != "" {
		t.Errorf("expected verdict and finding: %q", p)
	}
	if p := s.Check(v, nil, true); !strings.Contains(p, "no launch-thread-descheduled finding") {
		t.Errorf("missing finding: %q", p)
	}
	if p := s.Check(&finding.Verdict{Class: finding.SyncBound}, nil, true); !strings.Contains(p, "expected submission-bound") {
		t.Errorf("wrong class: %q", p)
	}
	if p := s.Check(nil, nil, true); p == "" {
		t.Error("no verdict accepted")
	}
	// A critical finding about a job that runs fails the scenario, even with
	// the right class.
	if p := s.Check(v, []finding.Finding{{ID: "launch-thread-descheduled"}, {ID: "job-stalled", Severity: finding.Critical}}, true); !strings.Contains(p, "critical job-stalled") {
		t.Errorf("critical finding on a running job: %q", p)
	}
	// The blocking synchronise loop on a crowded host: sync-bound (the GPU
	// idled over a tenth of the window, the synchronise's wait leading) is
	// accepted; sync-bound led by something else, or submission-bound, is not.
	gs, _ := Lookup("gpu-bound-sync")
	if p := gs.Check(&finding.Verdict{Class: finding.SyncBound, Because: []string{"launch-thread-waits-on-gpu"}}, nil, true); p != "" {
		t.Errorf("the synchronise's slow wake-ups: %q", p)
	}
	if p := gs.Check(&finding.Verdict{Class: finding.SyncBound, Because: []string{"launch-thread-spins-or-submits"}}, nil, true); !strings.Contains(p, "expected gpu-bound") {
		t.Errorf("sync-bound not led by the wait: %q", p)
	}
	if p := gs.Check(&finding.Verdict{Class: finding.SubmissionBound, Because: []string{"launch-thread-waits-on-gpu"}}, nil, true); !strings.Contains(p, "expected gpu-bound") {
		t.Errorf("submission-bound: %q", p)
	}
	st, _ := Lookup("stalled")
	if p := st.Check(&finding.Verdict{Class: finding.Stalled}, []finding.Finding{{ID: "job-stalled", Severity: finding.Critical}}, true); p != "" {
		t.Errorf("stalled scenario with its critical finding: %q", p)
	}
}

// TestSyncVariants: the synchronisation-bound job runs twice, once with
// blocking waits (sync-bound) and once with CUDA's spinning ones: with the
// probes (CPU profile, driver calls) the spin is sync-bound; without them
// the verdict must name neither class; the runner's environment says which.
func TestSyncVariants(t *testing.T) {
	block, _ := Lookup("sync-bound")
	spin, err := Lookup("sync-bound-spin")
	if err != nil || block.Python != spin.Python || block.Sync != "block" || spin.Sync != "spin" ||
		spin.Expect != finding.SyncBound || spin.WithoutProbes != finding.Inconclusive || len(spin.MustFind) == 0 {
		t.Fatalf("sync-bound %+v, sync-bound-spin %+v (%v)", block, spin, err)
	}
	spinFound := []finding.Finding{{ID: "launch-thread-spins-or-submits"}}
	if p := spin.Check(&finding.Verdict{Class: finding.Inconclusive}, spinFound, false); p != "" {
		t.Errorf("spinning, no probes, inconclusive: %q", p)
	}
	if p := spin.Check(&finding.Verdict{Class: finding.SyncBound}, spinFound, true); p != "" {
		t.Errorf("spinning, probed, sync-bound: %q", p)
	}
	if p := spin.Check(&finding.Verdict{Class: finding.Inconclusive}, spinFound, true); !strings.Contains(p, "expected sync-bound") {
		t.Errorf("spinning, probed, inconclusive: %q", p)
	}
	if p := spin.Check(&finding.Verdict{Class: finding.SubmissionBound}, spinFound, false); !strings.Contains(p, "expected inconclusive without the CPU profile") {
		t.Errorf("spinning, submission-bound without waiting for a CPU: %q", p)
	}
	for _, c := range []finding.Class{finding.SubmissionBound, finding.Inconclusive} {
		if p := spin.Check(&finding.Verdict{Class: c}, append(spinFound, finding.Finding{ID: "launch-thread-descheduled"}), true); p != "" {
			t.Errorf("spinning on a crowded host, %s with the launch thread descheduled: %q", c, p)
		}
	}
	if p := spin.Check(&finding.Verdict{Class: finding.SyncBound}, spinFound, false); p == "" {
		t.Error("spinning judged sync-bound without probes accepted")
	}
	// The training thread decoding its own batches: preprocessing-bound
	// with the profile, submission-bound (capped) without; never
	// submission-bound where the profile was taken.
	main, _ := Lookup("preprocessing-main-thread")
	if main.Expect != finding.Preprocessing || main.WithoutProbes != finding.SubmissionBound {
		t.Fatalf("preprocessing-main-thread expects %s (without probes %s)", main.Expect, main.WithoutProbes)
	}
	if p := main.Check(&finding.Verdict{Class: finding.SubmissionBound}, nil, true); !strings.Contains(p, "expected preprocessing-bound") {
		t.Errorf("decoding main thread, probed, submission-bound: %q", p)
	}
	if p := main.Check(&finding.Verdict{Class: finding.SubmissionBound}, nil, false); p != "" {
		t.Errorf("decoding main thread, no probes, submission-bound: %q", p)
	}
	if m := syncMode([]string{"GPUFEED_SIMDEV_SYNC=spin", "PATH=/bin", "GPUFEED_SIMDEV_SYNC=block"}); m != "block" {
		t.Errorf("the last GPUFEED_SIMDEV_SYNC counts: got %q", m)
	}
	if m := syncMode([]string{"PATH=/bin"}); m != "" {
		t.Errorf("no GPUFEED_SIMDEV_SYNC: got %q", m)
	}
}

// TestPythonWorkloadsCompile byte-compiles every embedded script with the
// simulated device's client beside them.
func TestPythonWorkloadsCompile(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	dir := t.TempDir()
	if err := writePython(dir); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.py"))
	scripts := map[string]bool{}
	for _, s := range scenarios {
		if s.Python != "" {
			scripts[s.Python] = true
		}
	}
	if len(files) < len(scripts)+2 { // and demo_common.py, the client
		t.Fatalf("%d files written for %d scripts", len(files), len(scripts))
	}
	cmd := exec.Command(py, append([]string{"-m", "py_compile"}, files...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONPYCACHEPREFIX="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("py_compile: %v\n%s", err, out)
	}
}

func TestRunWorkloadUnknown(t *testing.T) {
	if code := RunWorkload("nope", nil); code != 2 {
		t.Errorf("unknown workload: exit %d, want 2", code)
	}
	if code := RunWorkload("hog", []string{"--cpu", "-1"}); code != 2 {
		t.Errorf("hog on cpu -1: exit %d, want 2", code)
	}
}

// TestWholeDiskOfTempDir finds the disk under the temp directory as the
// storage scenario does, where there is one.
func TestWholeDiskOfTempDir(t *testing.T) {
	var st syscall.Stat_t
	if err := syscall.Stat(t.TempDir(), &st); err != nil {
		t.Fatal(err)
	}
	id, err := wholeDisk(st.Dev)
	if err != nil {
		t.Skipf("the temp directory is not on a block device here: %v", err)
	}
	if !regexp.MustCompile(`^\d+:\d+$`).MatchString(id) {
		t.Fatalf("disk %q, want MAJ:MIN", id)
	}
	if _, err := os.Stat(filepath.Join("/sys/dev/block", id)); err != nil {
		t.Errorf("disk %s not in /sys/dev/block: %v", id, err)
	}
	if _, err := os.Stat(filepath.Join("/sys/dev/block", id, "partition")); err == nil {
		t.Errorf("%s is a partition: throttles apply to whole disks", id)
	}
}

func TestCalibrateSpendsThreadCPU(t *testing.T) {
	runtime.LockOSThread() // thread CPU time is per thread
	defer runtime.UnlockOSThread()
	n := calibrate(100 * time.Microsecond)
	if n <= 0 {
		t.Fatalf("calibrate: %d iterations", n)
	}
	start := threadCPU()
	for i := 0; i < 100; i++ {
		spin(n)
	}
	// The thread may migrate or be preempted; only the order of magnitude
	// is checked (10 ms of work, in thread CPU time).
	if used := threadCPU() - start; used <= 0 {
		t.Errorf("spin used no thread CPU time")
	}
}
