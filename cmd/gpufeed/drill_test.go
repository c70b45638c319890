package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/golden"
	"github.com/gpufeed/gpufeed/internal/livetest"
)

// drillDoc is the part of a drill's JSON the tests read.
type drillDoc struct {
	Drill         string  `json:"drill"`
	Backend       *string `json:"backend"`
	ReferenceFrom *string `json:"reference_from"`
	Tables        []struct {
		ID      string `json:"id"`
		Detail  bool   `json:"detail"`
		Columns []struct {
			Key string `json:"key"`
		} `json:"columns"`
		Rows []struct {
			Key       string              `json:"key"`
			Measured  map[string]*float64 `json:"measured"`
			Reference map[string]*float64 `json:"reference"`
		} `json:"rows"`
	} `json:"tables"`
	Notes []string `json:"notes"`
}

// shape is what of a drill's output does not vary from run to run or
// machine to machine: its tables, their columns, their rows and which
// cells have a reference. Detail tables (series over time) have as many
// rows as readings: only their columns count.
func (d drillDoc) shape() string {
	var b strings.Builder
	fmt.Fprintf(&b, "drill %s, reference %v\n", d.Drill, d.ReferenceFrom != nil)
	for _, t := range d.Tables {
		var cols []string
		for _, c := range t.Columns {
			cols = append(cols, c.Key)
		}
		fmt.Fprintf(&b, "table %s (detail %v): %s\n", t.ID, t.Detail, strings.Join(cols, " "))
		if t.Detail {
			continue
		}
		for _, r := range t.Rows {
			var refs []string
			for _, c := range cols {
				if r.Reference[c] != nil {
					refs = append(refs, c)
				}
			}
			fmt.Fprintf(&b, "  row %s: reference for [%s]\n", r.Key, strings.Join(refs, " "))
		}
	}
	return b.String()
}

// syscallShape is the syscalls drill's shape: its rows depend on what the
// loop called, so only the tables, columns and the rows with a reference.
func (d drillDoc) syscallShape() string {
	var b strings.Builder
	fmt.Fprintf(&b, "drill %s, reference %v\n", d.Drill, d.ReferenceFrom != nil)
	for _, t := range d.Tables {
		var cols []string
		for _, c := range t.Columns {
			cols = append(cols, c.Key)
		}
		fmt.Fprintf(&b, "table %s (detail %v): %s\n", t.ID, t.Detail, strings.Join(cols, " "))
		var refs []string // in name order: the rows' order is the measured times'
		for _, r := range t.Rows {
			if r.Reference != nil {
				refs = append(refs, r.Key)
			}
		}
		sort.Strings(refs)
		for _, k := range refs {
			fmt.Fprintf(&b, "  row %s has a reference\n", k)
		}
	}
	return b.String()
}

func drillJSON(t *testing.T, args ...string) drillDoc {
	t.Helper()
	out, stderr, code := run(t, append([]string{"drill"}, args...)...)
	if code != 0 {
		t.Fatalf("drill %v: exit %d: %s", args, code, stderr)
	}
	validateSchema(t, out)
	var d drillDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func (d drillDoc) cell(t *testing.T, table, row, key string) float64 {
	t.Helper()
	for _, tb := range d.Tables {
		if tb.ID != table {
			continue
		}
		for _, r := range tb.Rows {
			if r.Key == row {
				if v := r.Measured[key]; v != nil {
					return *v
				}
				t.Fatalf("%s/%s: no %s", table, row, key)
			}
		}
	}
	t.Fatalf("no row %s in table %s", row, table)
	return 0
}

func TestDrillList(t *testing.T) {
	out, stderr, code := run(t, "drill")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	golden.Check(t, filepath.Join("testdata", "drill-list.txt"), out)
	if _, stderr, code := run(t, "drill", "nosuch"); code != exitUsage || !strings.Contains(stderr, "gpufeed drill lists them") {
		t.Errorf("unknown drill: exit %d, %q", code, stderr)
	}
}

// The syscalls drill over a real PyTorch training loop (Debian's
// python3-torch, a DataLoader with two worker processes), its system
// calls counted in the kernel: futex and poll lead, and the tensors the
// workers hand over show as accept4 (file descriptor passing), as in the
// reference.
func TestDrillSyscallsRealTrainingLoop(t *testing.T) {
	livetest.Need(t)
	if exec.Command("/usr/bin/python3", "-c", "import torch").Run() != nil {
		t.Skip("Debian's python3-torch is not installed (scripts/test.sh installs it)")
	}
	if os.Geteuid() != 0 {
		out, stderr, code := run(t, "drill", "syscalls", "--window", "2s")
		if code != exitRuntime || out != "" || !strings.Contains(stderr, "CAP_") {
			t.Errorf("unprivileged: exit %d, stdout %q, stderr %q: want status 3 naming the capability", code, out, stderr)
		}
		return
	}
	d := drillJSON(t, "syscalls", "--window", "2s", "-o", "json")
	golden.Check(t, filepath.Join("testdata", "drill-syscalls.shape"), d.syscallShape())
	if futex := d.cell(t, "syscalls", "futex", "calls_count"); futex < 10 {
		t.Errorf("futex: %v calls in 2 s of a DataLoader loop", futex)
	}
	if acc := d.cell(t, "syscalls", "accept4", "calls_count"); acc < 1 {
		t.Errorf("accept4: %v calls: the workers hand tensors over by file descriptor passing", acc)
	}
	top := d.Tables[0].Rows[0].Key
	if top != "futex" && top != "poll" && top != "accept4" {
		t.Errorf("the syscall with most time is %s: want the waits (futex, poll, accept4) to lead", top)
	}
}

// The jitter drill on the simulated driver, as a user runs it: the
// binary, busy processes it starts, pinning, a CUDA graph. The graph row
// is the GPU time; the quiet row is launch-bound.
func TestDrillJitterOnTheSimulator(t *testing.T) {
	livetest.Need(t)
	d := drillJSON(t, "jitter", "--driver", "sim", "--reps", "7", "-o", "json")
	golden.Check(t, filepath.Join("testdata", "drill-jitter.shape"), d.shape())
	if d.Backend == nil || !strings.Contains(*d.Backend, "simulated") {
		t.Errorf("backend %v: want the simulated driver named", d.Backend)
	}
	gpu, quiet := 2000*885.0, d.cell(t, "jitter", "quiet", "wall_ns")
	// The simulated device runs its kernels on a CPU thread: a host busy
	// beside the drill (make test's other lane) lengthens the kernels
	// themselves, so the fastest of the repetitions is held near the GPU time
	// (the unit test holds the median to 10 % on a quiet host; the median
	// crossed 25 % twice on a loaded host, 2.36 and 2.40 ms, and the
	// fastest once, 2.22 ms; of three repetitions, the fastest once 3.79
	// ms and the median 7.27 ms: seven give a quiet moment more chances).
	// What the replay removes, the launches' cost, is held whatever the load: the replay is a third of the
	// one-by-one launches at most. (The device's idle share is no such
	// measure here: beside three busy processes the median replay's
	// device thread waited for a CPU, and the device idled 44 % of it.)
	graph, fastest := d.cell(t, "jitter", "graph", "wall_ns"), d.cell(t, "jitter", "graph", "wall_min_ns")
	if fastest < 0.9*gpu || fastest > 1.5*gpu || graph < fastest {
		t.Errorf("graph replay %.3f ms at its fastest (median %.3f ms), want about the GPU time %.3f ms", fastest/1e6, graph/1e6, gpu/1e6)
	}
	if quietFastest := d.cell(t, "jitter", "quiet", "wall_min_ns"); fastest > quietFastest/3 {
		t.Errorf("graph replay %.3f ms, one-by-one launches %.3f ms at their fastest: want the replay a third of them at most", fastest/1e6, quietFastest/1e6)
	}
	t.Logf("graph replay %.3f ms at its fastest, median %.3f ms; GPU time %.3f ms", fastest/1e6, graph/1e6, gpu/1e6)
	if quiet < 2*gpu {
		t.Errorf("quiet %.3f ms: 2000 launches at the simulated launch cost take longer than the GPU time", quiet/1e6)
	}
	text, _, code := run(t, "drill", "jitter", "--driver", "sim", "--reps", "1", "--kernels", "200")
	if code != 0 || !strings.Contains(text, "reference: measured on an i9-13900K + RTX 4090, torch 2.8, Python 3.12") ||
		!strings.Contains(text, "one CUDA graph replay") {
		t.Errorf("text output:\n%s", text)
	}
}

func TestDrillCopyOnTheSimulator(t *testing.T) {
	d := drillJSON(t, "copy", "--driver", "sim", "--reps", "2", "--bytes", "8388608", "-o", "json")
	golden.Check(t, filepath.Join("testdata", "drill-copy.shape"), d.shape())
	pinned, pageable := d.cell(t, "copy", "h2d_pinned", "bandwidth_bytes_per_sec"), d.cell(t, "copy", "h2d_pageable", "bandwidth_bytes_per_sec")
	if share := d.cell(t, "copy", "h2d_pinned", "link_percent"); share < 50 || share > 85 {
		t.Errorf("pinned copies at %.0f %% of the simulated Gen4 x16 link, want about 80 %%", share)
	}
	if pageable > 0.8*pinned {
		t.Errorf("pageable %.1f GB/s not slower than pinned %.1f GB/s", pageable/1e9, pinned/1e9)
	}
}

// Real forked Python workers (Debian's python3 with numpy).
func TestDrillCowRealWorkers(t *testing.T) {
	d := drillJSON(t, "cow", "--items", "150000", "--workers", "2", "-o", "json")
	golden.Check(t, filepath.Join("testdata", "drill-cow.shape"), d.shape())
	grew := d.cell(t, "cow", "list", "uss_per_worker_end_bytes") - d.cell(t, "cow", "list", "uss_per_worker_start_bytes")
	flat := d.cell(t, "cow", "flat", "uss_per_worker_end_bytes") - d.cell(t, "cow", "flat", "uss_per_worker_start_bytes")
	if grew < 8<<20 || flat > grew/4 {
		t.Errorf("USS per worker grew %.1f MiB over a list, %.1f MiB over flat storage: want the list's pages copied, the flat buffer shared", grew/(1<<20), flat/(1<<20))
	}
}

// Where libcuda.so.1 cannot be used, --driver auto runs on a simulated GPU
// and says why, on stderr and in the report; a --driver naming nothing is
// a usage error before anything runs.
func TestDrillAutoFallsBackToTheSimulatorAndSaysWhy(t *testing.T) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		t.Skip("an NVIDIA driver is here: auto uses it")
	}
	out, stderr, code := run(t, "drill", "copy", "--reps", "1", "--bytes", "1048576")
	if code != 0 || !strings.Contains(stderr, "no usable CUDA driver here") || !strings.Contains(stderr, "libcuda.so.1") ||
		!strings.Contains(out, "ran on a simulated GPU") {
		t.Errorf("exit %d\nstderr %s\nstdout %s", code, stderr, out)
	}
	if _, stderr, code := run(t, "drill", "jitter", "--driver", "bogus"); code != exitUsage || !strings.Contains(stderr, "--driver") {
		t.Errorf("--driver bogus: exit %d, %q", code, stderr)
	}
}

// TestDrillCountsNameTheirFlag: a count below 1 is refused naming the one
// flag that was wrong and the value given, before any drill runs.
func TestDrillCountsNameTheirFlag(t *testing.T) {
	for _, tc := range []struct{ drill, flag, value string }{
		{"jitter", "--kernels", "0"}, {"jitter", "--reps", "-3"}, {"cow", "--workers", "0"}, {"cow", "--items", "0"}, {"copy", "--bytes", "0"},
	} {
		_, stderr, code := run(t, "drill", tc.drill, tc.flag, tc.value)
		want := "gpufeed: " + tc.flag + " " + tc.value + ": want 1 or more"
		if code != exitUsage || strings.TrimSpace(stderr) != want {
			t.Errorf("%s %s %s: exit %d, stderr %q; want %d and %q", tc.drill, tc.flag, tc.value, code, stderr, exitUsage, want)
		}
	}
}

// --json FILE writes the same result as JSON beside the text on stdout,
// from one run (the GPU check keeps both); a FILE that cannot be written
// fails before the drill runs.
func TestDrillJSONBesideTheText(t *testing.T) {
	path := filepath.Join(t.TempDir(), "copy.json")
	out, stderr, code := run(t, "drill", "copy", "--driver", "sim", "--reps", "1", "--bytes", "1048576", "--json", path)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, "gpufeed drill copy") || strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Errorf("stdout is not the text table:\n%s", out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	validateSchema(t, string(b))
	var d drillDoc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.cell(t, "copy", "h2d_pinned", "bandwidth_bytes_per_sec") <= 0 {
		t.Error("the JSON holds no pinned bandwidth")
	}
	_, stderr, code = run(t, "drill", "copy", "--driver", "sim", "--reps", "1", "--json", filepath.Join(t.TempDir(), "no-such-dir", "x.json"))
	if code != 2 || !strings.Contains(stderr, "--json") || !strings.Contains(stderr, "does not exist") {
		t.Errorf("an unwritable --json: exit %d, %q; want a usage error naming it", code, stderr)
	}
}
