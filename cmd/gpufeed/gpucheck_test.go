package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/livetest"
)

// scripts/gpu-check.sh end to end, as its dry run rehearses it here: the
// binary under test, gpufeed simdev and the simulated driver for the
// drills and the uprobe, Debian's CPU build of PyTorch for the one
// workload that runs without CUDA, every other step skipped with its
// reason; every result a file under the output directory.
func TestGPUCheckDryRun(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	if _, err := exec.LookPath("timeout"); err != nil {
		t.Skip("no timeout(1)")
	}
	out := t.TempDir()
	r := clitest.Run(t, "bash", clitest.Cmd{
		Args:    []string{"../../scripts/gpu-check.sh", "--dry-run", "--quick", "--out", out},
		Env:     []string{"GPUFEED=" + gpufeed(t), "GPU_CHECK_BUDGET=240"},
		Timeout: 5 * time.Minute,
	})
	if r.Code != 0 {
		t.Fatalf("gpu-check.sh --dry-run: exit %d\n%s", r.Code, r.Stderr)
	}
	steps, err := os.ReadFile(filepath.Join(out, "steps.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(steps)), "\n")[1:] {
		f := strings.Split(l, "\t")
		if len(f) != 4 {
			t.Fatalf("steps.tsv line %q: want step, status, seconds, note", l)
		}
		status[f[0]] = f[1]
		if f[1] == "skipped" && f[3] == "" {
			t.Errorf("step %s skipped without a reason", f[0])
		}
	}
	for step, want := range map[string]string{"facts": "ok", "drill-jitter": "ok", "drill-copy": "ok", "drill-cow": "ok",
		"nvml-compare": "skipped", "workload-launch": "skipped", "workload-gpu": "skipped", "verdicts": "ok", "uprobe": "ok"} {
		if status[step] != want {
			t.Errorf("step %s: %q, want %s\n%s", step, status[step], want, steps)
		}
	}
	for _, f := range []string{"summary.txt", "facts.txt", "drills/jitter.json", "drills/copy.txt", "drills/cow.json", "verdicts.json", "uprobe.json"} {
		if fi, err := os.Stat(filepath.Join(out, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v (want a non-empty result file)", f, err)
		}
	}
	var up struct {
		Result string `json:"result"`
		Error  string `json:"error"`
		Hits   int    `json:"hits"`
	}
	if b, err := os.ReadFile(filepath.Join(out, "uprobe.json")); err == nil && json.Unmarshal(b, &up) == nil {
		if strings.HasPrefix(up.Result, "attached") && up.Hits == 0 && os.Geteuid() == 0 {
			t.Errorf("uprobe attached to the simulated driver but counted no cuLaunchKernel over a launch loop: %+v", up)
		}
		if up.Result == "not attached" && up.Error == "" {
			t.Errorf("uprobe not attached, with no reason: %+v", up)
		}
		t.Logf("uprobe on the simulated driver: %s %s", up.Result, up.Error)
	} else {
		t.Errorf("uprobe.json: %v", err)
	}
	// Where Debian's CPU PyTorch is installed, the preprocessing workload
	// ran under diagnose and its profiler trace was read by gpufeed trace.
	if exec.Command("/usr/bin/python3", "-c", "import torch").Run() == nil {
		if status["workload-preprocess"] != "ok" || status["trace-preprocess"] != "ok" {
			t.Errorf("preprocess workload %q, its trace %q: want both ok with PyTorch present", status["workload-preprocess"], status["trace-preprocess"])
		}
	}
}

// The check's NVML comparison over nvidia-smi's CSV (its --format=csv
// header and units): a report that agrees, then one whose power limit
// nvidia-smi contradicts.
func TestGPUCheckComparesNVMLWithNvidiaSMI(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	out := filepath.Join(t.TempDir(), "compare")
	cmp := func(csv string) (string, int) {
		c := exec.Command(py, "../../python/gpucheck/compare.py", "nvml", "testdata/demo-gpu-bound.json", csv, out)
		b, _ := c.CombinedOutput()
		return string(b), c.ProcessState.ExitCode()
	}
	if text, code := cmp("testdata/gpucheck-smi.csv"); code != 0 || strings.Contains(text, "DIFFER") {
		t.Errorf("exit %d:\n%s", code, text)
	}
	b, err := os.ReadFile("testdata/gpucheck-smi.csv")
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(t.TempDir(), "smi.csv")
	os.WriteFile(bad, []byte(strings.ReplaceAll(string(b), "700.00 W", "400.00 W")), 0o644)
	text, code := cmp(bad)
	if code != 1 || !strings.Contains(text, "power limit W") || !strings.Contains(text, "DIFFER") {
		t.Errorf("a contradicted power limit: exit %d:\n%s", code, text)
	}
	if _, err := os.Stat(out + ".json"); err != nil {
		t.Errorf("no JSON result: %v", err)
	}
}
