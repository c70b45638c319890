package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/golden"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/render"
)

// A committed recording (scripts/capture-proc-fixture.py --run 2.5 under
// diagnose --record) judged by report: golden text and JSON.
func TestReportGolden(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		out, stderr, code := run(t, "report", "-o", format, "testdata/trainer.gpufeed")
		if code != 0 || stderr != "" {
			t.Fatalf("report -o %s: exit %d, stderr %q", format, code, stderr)
		}
		golden.Check(t, filepath.Join("testdata", "trainer-report."+format), out)
	}
}

// The live report and the report of its recording are the same, byte for byte.
func TestReportOfRecordingEqualsLive(t *testing.T) {
	livetest.Need(t)
	dir := t.TempDir()
	for _, format := range []string{"json", "text"} {
		rec := filepath.Join(dir, format+".gpufeed")
		live, stderr, code := run(t, "diagnose", "--duration", "2s", "-o", format, "--record", rec, "--",
			"sh", "-c", "sleep 0.4 & while :; do :; done & sleep 1.2; kill $!")
		if code != 0 {
			t.Fatalf("diagnose: exit %d: %s", code, stderr)
		}
		if stderr != "" {
			t.Errorf("stderr is not a terminal: no progress expected, got %q", stderr)
		}
		if format == "json" {
			validateSchema(t, live)
		}
		replay, stderr, code := run(t, "report", "-o", format, rec)
		if code != 0 || stderr != "" {
			t.Fatalf("report: exit %d: %s", code, stderr)
		}
		// The header names the command that wrote each; nothing else differs.
		replay = strings.Replace(replay, `"command": "report",`, `"command": "diagnose",`, 1)
		if live != replay {
			t.Errorf("-o %s: report of the recording differs from the live report:\n--- live\n%s\n--- replay\n%s", format, live, replay)
		}
	}
}

// diagnose -- CMD exits with the command's status, and a command that ends
// early ends the window with what was seen.
func TestDiagnoseExitsWithCommandStatus(t *testing.T) {
	out, _, code := run(t, "diagnose", "--duration", "5s", "-o", "json", "--", "sh", "-c", "sleep 0.3; exit 7")
	if code != 7 {
		t.Fatalf("exit status %d, want the command's 7", code)
	}
	var r render.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Window.Ended != "target exited" || r.Window.DurationNS > 3e9 || r.Target.ExitCode == nil || *r.Target.ExitCode != 7 {
		t.Errorf("window %+v exit %v", r.Window, r.Target.ExitCode)
	}
	if r.Header.SchemaVersion != render.SchemaVersion || len(r.Processes) == 0 || r.Observer == nil {
		t.Errorf("report incomplete: %+v", r)
	}
}

// diagnose --pid over the committed /proc fixture (the real read path, with
// an injected root): the tree, the vanished thread, the roles.
func TestDiagnoseFixtureRoot(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	out, stderr, code := run(t, "diagnose", "--root", hostRoot(t, "../../testdata/proc/trainer", ""),
		"--pid", "26627", "--duration", "2s", "-o", "json")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var r render.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Processes) != 2 || r.Counts.VanishedThreads != 1 {
		t.Fatalf("processes %d counts %+v", len(r.Processes), r.Counts)
	}
	roles := map[string]bool{}
	for _, p := range r.Processes {
		roles[p.Role] = true
		for _, th := range p.Threads {
			roles[th.Role] = true
		}
	}
	for _, want := range []string{"rank", "dataloader-worker", "autograd", "pin-memory", "nccl", "intra-op"} {
		if !roles[want] {
			t.Errorf("role %q not named; roles %v", want, roles)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"diagnose"},
		{"diagnose", "--pid", "1", "--", "true"},
		{"diagnose", "--pid", "1", "-o", "xml"},
		{"report", "testdata/does-not-exist"},
		{"diagnose", "--pid", "999999999", "--duration", "2s"},
	} {
		_, stderr, code := run(t, args...)
		if code == 0 || !strings.HasPrefix(stderr, "gpufeed: ") {
			t.Errorf("%v: exit %d, stderr %q: want a failure with a message", args, code, stderr)
		}
	}
}
