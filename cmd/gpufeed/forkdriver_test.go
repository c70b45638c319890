package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/render"
)

// Fork after the CUDA driver was loaded, recognised by the driver's API
// (a mapped library exporting cuInit), not by libcuda's file name alone:
// attach mode on a running job, repeated.

// forkAfterSimDriver initialises gpufeed's simulated CUDA driver (cuInit,
// a context, a kernel), then iterates a torch DataLoader whose two
// persistent workers are forked.
const forkAfterSimDriver = `
import sys, time
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev
dev = gpufeed_simdev.connect()
dev.launch(100)
dev.synchronize()
import torch
from torch.utils.data import DataLoader, Dataset
class DS(Dataset):
    def __len__(self): return 1 << 30
    def __getitem__(self, i):
        time.sleep(0.05)
        return torch.ones(4)
dl = DataLoader(DS(), batch_size=1, num_workers=2, multiprocessing_context="fork", persistent_workers=True, prefetch_factor=1)
it = iter(dl)
next(it)
print("ready", flush=True)
while True:
    next(it)
    time.sleep(0.05)
`

// forkAfterDlopen loads a shared object with ctypes (calling cuInit when
// it defines it) and forks two worker processes that idle.
const forkAfterDlopen = `
import ctypes, multiprocessing as mp, sys, time
lib = ctypes.CDLL(sys.argv[1])
if hasattr(lib, "cuInit"):
    lib.cuInit(0)
def work():
    while True:
        time.sleep(0.1)
ctx = mp.get_context("fork")
ps = [ctx.Process(target=work, daemon=True) for _ in range(2)]
for p in ps:
    p.start()
print("ready", flush=True)
while True:
    time.sleep(0.1)
`

// buildLib compiles C source into a shared object named name.
func buildLib(t *testing.T, name, src string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	c, so := filepath.Join(dir, "lib.c"), filepath.Join(dir, name)
	if err := os.WriteFile(c, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-shared", "-fPIC", "-O2", "-o", so, c).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return so
}

// workerPIDs are the children of parent in the report.
func workerPIDs(r render.Report, parent int) []int {
	var out []int
	for _, p := range r.Processes {
		if p.PPID == parent && !p.Exited && !strings.Contains(strings.Join(p.Cmdline, " "), "resource_tracker") {
			out = append(out, p.PID)
		}
	}
	return out
}

// checkForkAfterDriver: every run finds the two forked workers, names
// them, and names the driver library by its file name.
func checkForkAfterDriver(t *testing.T, runs []attachRun, parent int, lib string) {
	t.Helper()
	for i, r := range runs {
		if r.err != "" {
			t.Errorf("run %d: %s", i, r.err)
			continue
		}
		fs := findingsWith(r.rep, "fork-after-cuda-init")
		if len(fs) != 1 {
			t.Errorf("run %d (%v): fork-after-cuda-init %d times, want once; findings:\n%s", i, r.window, len(fs), claims(r.rep))
			continue
		}
		f := fs[0]
		want := regexp.MustCompile(`forked 2 workers \(pids (\d+), ?(\d+)\) after loading the CUDA driver \(` + regexp.QuoteMeta(lib) + `\)`)
		m := want.FindStringSubmatch(f.Claim)
		if m == nil {
			t.Errorf("run %d: claim %q, want it to match %s", i, f.Claim, want)
			continue
		}
		workers := workerPIDs(r.rep, parent)
		for _, s := range m[1:] {
			pid, _ := strconv.Atoi(s)
			found := false
			for _, w := range workers {
				found = found || w == pid
			}
			if !found {
				t.Errorf("run %d: claim names pid %d, not one of the parent's children %v", i, pid, workers)
			}
		}
		ev := false
		for _, e := range f.Evidence {
			ev = ev || strings.Contains(e.What, "exporting cuInit") && strings.HasSuffix(e.Text, "/"+lib)
		}
		if !ev {
			t.Errorf("run %d: no evidence naming the library exporting cuInit: %+v", i, f.Evidence)
		}
	}
}

func TestForkAfterSimulatedDriverAttached(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	py := requireTorch(t)
	pydir, _ := filepath.Abs("../../python")
	sock := startSimdev(t)
	w := startWorkload(t, []string{"GPUFEED_SIMDEV=" + sock}, true, py, "-c", forkAfterSimDriver, pydir)
	runs := attachRepeatedly(t, w.Process.Pid, 2, []time.Duration{2 * time.Second, 3 * time.Second})
	checkForkAfterDriver(t, runs, w.Process.Pid, "libgpufeed-simcuda.so")
}

func TestForkAfterDlopenedDriverAttached(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	lib := buildLib(t, "libvendorshim.so", "int cuInit(unsigned int flags) { return flags ? 1 : 0; }\n")
	w := startWorkload(t, nil, true, python, "-c", forkAfterDlopen, lib)
	runs := attachRepeatedly(t, w.Process.Pid, 2, []time.Duration{2 * time.Second, 3 * time.Second})
	checkForkAfterDriver(t, runs, w.Process.Pid, "libvendorshim.so")
}

// TestForkAfterOtherLibraryAttached: a library that does not export
// cuInit (it only calls something named like it) is no driver: the fork
// is found, no fork-after-cuda-init.
func TestForkAfterOtherLibraryAttached(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	lib := buildLib(t, "libcudnn_like.so", "static int cuInit(void) { return 0; }\nint cuInitLater(void) { return cuInit(); }\n")
	w := startWorkload(t, nil, true, python, "-c", forkAfterDlopen, lib)
	runs := attachRepeatedly(t, w.Process.Pid, 2, []time.Duration{2 * time.Second, 3 * time.Second})
	for i, r := range runs {
		if r.err != "" {
			t.Errorf("run %d: %s", i, r.err)
			continue
		}
		if fs := findingsWith(r.rep, "fork-after-cuda-init"); len(fs) != 0 {
			t.Errorf("run %d: %s", i, fs[0].Claim)
		}
		if ws := findingsWith(r.rep, "worker-start-method"); len(ws) != 1 || !strings.Contains(ws[0].Claim, "2 worker processes by fork") {
			t.Errorf("run %d: the fork itself was not found:\n%s", i, claims(r.rep))
		}
	}
}
