package compare

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/judge"
)

func load(t *testing.T, path string) *Input {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := Load(path, f)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

var (
	checkDir = filepath.Join("..", "..", "testdata", "check", "golden")
	runDir   = filepath.Join("..", "..", "testdata", "compare")
)

// TestNodesNameWhatDiffers: between the check fixtures, the downgraded
// link is the server-downgraded node's, the far NUMA binding the
// wrong-numa node's; what every node says alike is not listed, whatever
// subject a per-process check names (no --pid on two of them).
func TestNodesNameWhatDiffers(t *testing.T) {
	r := Compare([]*Input{load(t, filepath.Join(checkDir, "server.json")), load(t, filepath.Join(checkDir, "server-downgraded.json")),
		load(t, filepath.Join(checkDir, "wrong-numa.json"))})
	if r.Nodes == nil || !r.Differs {
		t.Fatalf("no node comparison: %+v", r)
	}
	got := map[string]string{}
	for _, d := range r.Nodes.Status {
		got[d.ID] = strings.Join(d.Odd, ",")
	}
	want := map[string]string{"pcie-link:gpu-0000:92:00.0": "server-downgraded", "numa-affinity": "wrong-numa", "numa-memory": "wrong-numa"}
	for id, odd := range want {
		if got[id] != odd {
			t.Errorf("%s: odd %q, want %q", id, got[id], odd)
		}
	}
	if len(got) != len(want) {
		t.Errorf("status differences %v, want only %v", got, want)
	}
	if r.Nodes.Status[0].Cells[1].Status != "fail" {
		t.Errorf("the worst difference first: %+v", r.Nodes.Status[0])
	}
	for _, d := range r.Nodes.Values {
		if strings.HasPrefix(d.ID, "limit-") {
			t.Errorf("%s listed: only its subject differs (no --pid), not what it says", d.ID)
		}
	}
	// One node alone against itself: nothing differs.
	same := Compare([]*Input{load(t, filepath.Join(checkDir, "server.json")), load(t, filepath.Join(checkDir, "server.json"))})
	if same.Differs || len(same.Nodes.Status)+len(same.Nodes.Values) != 0 {
		t.Errorf("a document against itself differs: %+v", same.Nodes)
	}
	if same.Inputs[0].Label == same.Inputs[1].Label {
		t.Errorf("labels not unique: %s", same.Inputs[0].Label)
	}
}

// TestRecordingsNoisyNeighbour: the scenario with its two CPU hogs against
// the same job alone (both recorded by gpufeed demo): GPU busy lower and
// the launch thread's wait for a CPU higher, both beyond the noise; the
// same job alone twice differs only inside it.
func TestRecordingsNoisyNeighbour(t *testing.T) {
	alone, noisy, alone2 := load(t, filepath.Join(runDir, "alone.gpufeed")), load(t, filepath.Join(runDir, "noisy.gpufeed")), load(t, filepath.Join(runDir, "alone2.gpufeed"))
	r := Compare([]*Input{alone, noisy})
	moves := map[string]Move{}
	for _, m := range r.Runs.Moves {
		moves[m.Key] = m
	}
	if m := moves["gpu_busy"]; !m.Outside || m.Worse != 1 || m.Delta > -20 {
		t.Errorf("GPU busy %+v: want it about 28 points lower beyond the noise", m)
	}
	if m := moves["launch_wait"]; !m.Outside || m.Worse != 1 || m.Delta < 40 {
		t.Errorf("launch thread's wait %+v: want it about 50 points higher beyond the noise", m)
	}
	if r.Runs.Straggler != nil {
		t.Errorf("two runs on one host are a before and after, not nodes: straggler %+v", r.Runs.Straggler)
	}
	r = Compare([]*Input{alone, alone2})
	for _, m := range r.Runs.Moves {
		if m.Outside || !m.Measured {
			t.Errorf("%s: %+v: the same scenario twice", m.Key, m)
		}
	}
	if r.Differs {
		t.Error("the same scenario twice differs")
	}
}

// TestNoiseRule: a move is beyond the noise only when larger than the
// larger run's half p10-p90 spread, and claims nothing when neither run
// keeps a spread or measured too few intervals.
func TestNoiseRule(t *testing.T) {
	m := func(p10, p50, p90 float64, n int) *Metric {
		return &Metric{Key: "gpu_busy", Name: "GPU busy", Unit: "%", Better: 1, P10: p10, P50: p50, P90: p90, Mean: p50, N: n}
	}
	nan := math.NaN()
	for _, tc := range []struct {
		name             string
		a, b             *Metric
		measured, beyond bool
		worse            int
	}{
		{"apart", m(40, 45, 50, 100), m(10, 15, 20, 100), true, true, 1},
		{"better", m(10, 15, 20, 100), m(40, 45, 50, 100), true, true, -1},
		{"within the wider spread", m(40, 45, 50, 100), m(20, 38, 56, 100), true, false, 0},
		{"exactly the noise", m(40, 45, 50, 100), m(35, 40, 45, 100), true, false, 0},
		{"too few intervals", m(40, 45, 50, 5), m(10, 15, 20, 5), false, false, 0},
		{"one spread", m(40, 45, 50, 100), m(nan, 15, nan, 100), true, true, 1},
		{"no spread", m(nan, 45, nan, 100), m(nan, 15, nan, 100), false, false, 0},
	} {
		mv := move(Row{Key: "gpu_busy", Name: "GPU busy", Unit: "%", Metrics: []*Metric{tc.a, tc.b}}, []string{"a", "b"})
		if mv.Measured != tc.measured || mv.Outside != tc.beyond || mv.Worse != tc.worse {
			t.Errorf("%s: %+v: want measured %v, beyond %v, worse %d", tc.name, mv, tc.measured, tc.beyond, tc.worse)
		}
	}
}

// TestStraggler: among nodes, the one whose GPU is busy the least beyond
// the noise; none when they are all within it.
func TestStraggler(t *testing.T) {
	run := func(host string, p50 float64) *Input {
		return &Input{File: host + ".json", Host: host, Kind: KindReport, Run: &Run{Comm: "python3", Verdict: "gpu-bound",
			Metrics: []*Metric{{Key: "gpu_busy", Name: "GPU busy", Unit: "%", Better: 1, P10: p50 - 3, P50: p50, P90: p50 + 3, Mean: p50, N: 60}}}}
	}
	r := Compare([]*Input{run("node-a", 92), run("node-b", 90), run("node-c", 61), run("node-d", 91)})
	s := r.Runs.Straggler
	if s == nil || s.Label != "node-c" || s.Others != 91 || math.Abs(s.Slowdown-91.0/61) > 1e-9 {
		t.Fatalf("straggler %+v: want node-c, 61 %% against 91 %%", s)
	}
	r = Compare([]*Input{run("node-a", 92), run("node-b", 90), run("node-c", 88)})
	if r.Runs.Straggler != nil || !strings.HasPrefix(r.Runs.StragglerNote, "no straggler") {
		t.Errorf("straggler %+v (%s) among nodes within their spread", r.Runs.Straggler, r.Runs.StragglerNote)
	}
}

// TestDeathsAcrossNodes: the judge's deaths of each node (an OOM kill, a
// segfault), ordered across nodes; two deaths closer than the clocks tell
// are not ordered; a member only the sampler saw go has no time to order.
func TestDeathsAcrossNodes(t *testing.T) {
	a := deathsOf([]judge.Death{
		{PID: 4242, Comm: "python3", Member: "rank 3", Cause: "oom-kill", Where: "memory cgroup /slurm/uid_1000/job_42", Time: "2026-03-01T12:00:02.000000Z", Via: "pid",
			Line: "Memory cgroup out of memory: Killed process 4242 (python3) total-vm:75672kB"},
		{PID: 4243, Comm: "python3", Member: "rank 4", Cause: "exited", Via: "pid"},
	})
	b := deathsOf([]judge.Death{
		{PID: 5151, Comm: "python3", Cause: "segfault", Where: "in libc.so.6", Time: "2026-03-01T12:00:05.000000Z", Via: "pid"},
	})
	if len(a) != 1 || a[0].Cause != "oom-kill" || a[0].Member != "rank 3" || a[0].Where != "memory cgroup /slurm/uid_1000/job_42" || a[0].Resolution != time.Microsecond {
		t.Fatalf("OOM kill read as %+v", a)
	}
	if len(b) != 1 || b[0].Cause != "segfault" || b[0].Where != "in libc.so.6" {
		t.Fatalf("segfault read as %+v", b)
	}
	for i := range a {
		a[i].Resolution = time.Second
	}
	b[0].Resolution = time.Second
	runA := &Input{File: "a.json", Host: "node-a", Kind: KindReport, Run: &Run{Deaths: a}}
	runB := &Input{File: "b.json", Host: "node-b", Kind: KindReport, Run: &Run{Deaths: b}}
	r := Compare([]*Input{runB, runA})
	if f := r.First; f == nil || f.Death.Label != "node-a" || f.Next == nil || f.Next.Label != "node-b" || f.Gap != 3*time.Second || !f.Sure {
		t.Fatalf("first death %+v", r.First)
	}
	b[0].At = a[0].At.Add(500 * time.Millisecond)
	r = Compare([]*Input{runB, runA})
	if r.First.Sure {
		t.Errorf("deaths 0.5 s apart with clocks read to the second are ordered: %+v", r.First)
	}
}

// TestLoadRejects: what is not a gpufeed document is an error naming the
// file and the place.
func TestLoadRejects(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"", "x.json: empty file"},
		{"{\n  \"tool\": gpufeed\n}", "x.json: line 2, column 11: invalid character 'g'"},
		{`{"tool": "gpufeed", "schema_version": 2, "command": "diagnose", "window": {"started": "yesterday"}}`, "window.started \"yesterday\""},
		{`{"tool": "gpufeed", "schema_version": 2, "command": "check", "results": [{"id": "a", "status": "ok"}, {"id": "a", "status": "ok"}]}`, "results[1]: id \"a\" repeated"},
		{`{"tool": "gpufeed", "schema_version": 2, "command": "diagnose", "gpus": [{"util_p50_percent": "high"}]}`, "field gpus.util_p50_percent"},
	} {
		_, err := Load("x.json", bytes.NewReader([]byte(tc.doc)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%.40q: error %v, want %q", tc.doc, err, tc.want)
		}
	}
}

// Two diagnose reports of a DataLoader job: the forked workers' copies of
// their parent's memory (summed over the workers alive at the end) become a
// row and a move, less being better.
func TestWorkerCopiesCompared(t *testing.T) {
	doc := func(copied ...float64) *Input {
		procs := `{"pid": 100, "comm": "python3", "cpu_percent": {}}`
		for i, c := range copied {
			procs += fmt.Sprintf(`, {"pid": %d, "comm": "python3", "cpu_percent": {}, "cow_copied_bytes": %g}`, 200+i, c)
		}
		procs += `, {"pid": 300, "comm": "python3", "cpu_percent": {}, "exited": true, "cow_copied_bytes": 1e9}`
		b := fmt.Sprintf(`{"tool": "gpufeed", "schema_version": %d, "command": "diagnose", "target": {"pid": 100, "comm": "python3"},
			"window": {"started": "2026-07-13T14:22:00Z", "duration_ns": 10000000000, "samples": 101}, "processes": [%s]}`, SchemaVersion, procs)
		in, err := Load("run.json", strings.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	r := Compare([]*Input{doc(40<<20, 40<<20, 40<<20, 40<<20), doc(2<<20, 2<<20, 2<<20, 2<<20)})
	var row *Row
	for i := range r.Runs.Rows {
		if r.Runs.Rows[i].Key == "worker_cow_copied" {
			row = &r.Runs.Rows[i]
		}
	}
	if row == nil || row.Metrics[0].Mean != 160 || row.Metrics[1].Mean != 8 || row.Unit != "MiB" || row.Metrics[0].Of != "4 forked workers, at the end of the window" {
		t.Fatalf("row %+v", row)
	}
	var mv *Move
	for i := range r.Runs.Moves {
		if r.Runs.Moves[i].Key == "worker_cow_copied" {
			mv = &r.Runs.Moves[i]
		}
	}
	if mv == nil || mv.Delta != -152 || mv.Stat != "mean" || mv.Measured {
		t.Errorf("move %+v", mv)
	}
	// A run without forked workers read has no such row.
	r = Compare([]*Input{doc(), doc()})
	for _, row := range r.Runs.Rows {
		if row.Key == "worker_cow_copied" {
			t.Errorf("row without readings: %+v", row)
		}
	}
}

// TestReportReadAsJudgedNotFromProse: compare reads a report's launch
// thread and the members that died from the judge's own fields (job,
// deaths), never from the findings' wording or the kernel lines' text:
// reworded, they compare the same. The busiest main thread is not the
// launch thread when the judge named another.
func TestReportReadAsJudgedNotFromProse(t *testing.T) {
	doc := fmt.Sprintf(`{"tool": "gpufeed", "schema_version": %d, "command": "diagnose", "target": {"pid": 100, "comm": "python3"},
		"window": {"started": "2026-07-13T14:22:00Z", "duration_ns": 10000000000, "samples": 101},
		"verdict": {"class": "stalled", "confidence_percent": 80},
		"findings": [{"id": "member-died", "subject": "the member we lost, formerly known as pid 4242", "claim": "one went away"}],
		"processes": [{"pid": 100, "comm": "python3", "role": "rank", "rank": "0", "cpu_percent": {"p50": 95, "samples": 100}, "threads": [
			{"tid": 100, "comm": "python3", "role": "main", "cpu_percent": {"p50": 95, "samples": 100}, "runqueue_wait_percent": 1},
			{"tid": 130, "comm": "pt_launcher", "role": "unnamed", "cpu_percent": {"p50": 40, "samples": 100}, "runqueue_wait_percent": 30}]}],
		"events": [{"at_ns": 2000000000, "kind": "kmsg", "pid": 4242, "text": "the kernel stopped task 4242 for memory"}],
		"job": {"launch_thread": {"pid": 100, "tid": 130, "comm": "pt_launcher"}, "gpu_processes": [100], "gpu_processes_how": "listed",
			"members": [{"pid": 100, "ppid": 1, "comm": "python3", "role": "rank", "rank": "0", "name": "rank 0", "uses_gpu": true, "exited": false}], "fork_groups": []},
		"kernel_events": [{"at_ns": 2000000000, "time": "2026-07-13T14:22:02.000000Z", "kind": "oom-kill", "pid": 4242, "comm": "python3", "job": true, "member": "rank 2", "line": "the kernel stopped task 4242 for memory"}],
		"deaths": [{"pid": 4242, "comm": "python3", "member": "rank 2", "cause": "oom-kill", "where": "memory cgroup /job", "time": "2026-07-13T14:22:02.000000Z", "via": "kernel log"}]}`, SchemaVersion)
	in, err := Load("run.json", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	d := in.Run.Deaths
	if len(d) != 1 || d[0].PID != 4242 || d[0].Member != "rank 2" || d[0].Cause != "oom-kill" || d[0].Where != "memory cgroup /job" ||
		!d[0].At.Equal(time.Date(2026, 7, 13, 14, 22, 2, 0, time.UTC)) {
		t.Errorf("deaths %+v: want rank 2 (pid 4242) killed for memory at 14:22:02, as the judge wrote it", d)
	}
	var launch []string
	for _, m := range in.Run.Metrics {
		if m.Key == "launch_cpu" || m.Key == "launch_wait" {
			launch = append(launch, m.Key+" of "+m.Of)
		}
	}
	if want := []string{"launch_cpu of pt_launcher (tid 130)", "launch_wait of pt_launcher (tid 130)"}; fmt.Sprint(launch) != fmt.Sprint(want) {
		t.Errorf("launch thread metrics %v, want %v (the judge's launch thread, not the busiest main thread)", launch, want)
	}
}
