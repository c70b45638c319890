package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/check"
	"github.com/gpufeed/gpufeed/internal/demo"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/golden"
)

// demoReport is the part of the JSON report the scenario tests read.
type demoReport struct {
	Verdict  *finding.Verdict  `json:"verdict"`
	Findings []finding.Finding `json:"findings"`
}

// TestDemoScenarios runs every built-in scenario through the binary, one
// after the other (they measure the machine; running them side by side
// would measure each other): `gpufeed demo NAME` over its default 10 s
// window must exit 0 with the scenario's verdict and findings, and
// `gpufeed report` on the recording must give the same verdict and
// findings. The healthy GPU-bound scenario must have no warning of gpufeed's
// own rules (the platform checks report this machine as it is). Neither
// report, text or JSON, may name an internal reference.
func TestDemoScenarios(t *testing.T) {
	if testing.Short() {
		t.Skip("the scenarios take about two minutes (ten 10 s windows): skipped with -short")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not on PATH: the Python scenarios cannot run")
	}
	checkIDs := map[string]bool{}
	for _, c := range check.Checks() {
		checkIDs[c.ID] = true
	}
	for _, sc := range demo.Scenarios() {
		t.Run(sc.Name, func(t *testing.T) {
			rec := filepath.Join(t.TempDir(), sc.Name+".gpufeed")
			out, stderr, code := run(t, "demo", sc.Name, "--record", rec, "-o", "json")
			if code == 2 && sc.Storage && strings.Contains(stderr, "tmpfs") {
				t.Skipf("this machine cannot produce storage waits: %s", stderr)
			}
			var live demoReport
			if err := json.Unmarshal([]byte(out), &live); err != nil || live.Verdict == nil {
				t.Fatalf("demo %s: exit %d, no JSON report (%v)\nstderr: %s", sc.Name, code, err, stderr)
			}
			t.Logf("demo %s: %s (confidence %.2f): %s", sc.Name, live.Verdict.Class, live.Verdict.Confidence, live.Verdict.Summary)
			if code != 0 {
				if sc.Storage && strings.Contains(stderr, "no read throttle") && live.Verdict.Class != sc.Expect {
					t.Skipf("no block-I/O throttle here and the unthrottled disk answered too fast: %s", stderr)
				}
				t.Fatalf("demo %s: exit %d, verdict %s (%s)\nstderr: %s\nfindings: %s", sc.Name, code, live.Verdict.Class,
					live.Verdict.Summary, stderr, findingLines(live.Findings))
			}
			if problem := sc.Check(live.Verdict, live.Findings); problem != "" {
				t.Errorf("demo %s exited 0 but: %s", sc.Name, problem)
			}
			if sc.Expect == finding.GPUBound {
				for _, f := range live.Findings {
					switch {
					case f.Severity < finding.Warning:
					case checkIDs[f.ID]:
						t.Logf("platform check on this machine: %s %s: %s", f.Severity, f.ID, f.Claim)
					default:
						t.Errorf("healthy GPU-bound job got a %s: %s: %s", f.Severity, f.ID, f.Claim)
					}
				}
			}

			out, stderr, code = run(t, "report", rec, "-o", "json")
			var replay demoReport
			if err := json.Unmarshal([]byte(out), &replay); code != 0 || err != nil || replay.Verdict == nil {
				t.Fatalf("report %s: exit %d (%v)\nstderr: %s", rec, code, err, stderr)
			}
			if !reflect.DeepEqual(live.Verdict, replay.Verdict) {
				t.Errorf("the recording judged later gives another verdict:\nlive:   %+v\nreplay: %+v", live.Verdict, replay.Verdict)
			}
			if a, b := findingLines(live.Findings), findingLines(replay.Findings); a != b {
				t.Errorf("the recording judged later gives other findings:\nlive:\n%s\nreplay:\n%s", a, b)
			}
			// What a user reads, text and JSON, names nothing internal.
			text, stderr, code := run(t, "report", rec)
			if code != 0 {
				t.Fatalf("report %s (text): exit %d\nstderr: %s", rec, code, stderr)
			}
			for name, o := range map[string]string{"JSON": out, "text": text} {
				for _, r := range golden.InternalReferences(o) {
					t.Errorf("demo %s, %s report: an internal reference no user can follow: %s", sc.Name, name, r)
				}
			}
		})
	}
}

func findingLines(fs []finding.Finding) string {
	var b strings.Builder
	for _, f := range fs {
		b.WriteString(f.Severity.String() + " " + f.ID + ": " + f.Claim + "\n")
	}
	return b.String()
}

// TestDemoList lists every scenario with its expected verdict, the
// default first.
func TestDemoList(t *testing.T) {
	out, stderr, code := run(t, "demo", "--list")
	if code != 0 || stderr != "" {
		t.Fatalf("demo --list: exit %d, stderr %q", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(demo.Scenarios())+1 || !strings.HasPrefix(lines[1], demo.Default+" (default)") {
		t.Errorf("demo --list:\n%s", out)
	}
	for _, s := range demo.Scenarios() {
		if !strings.Contains(out, s.Name) || !strings.Contains(out, string(s.Expect)) {
			t.Errorf("demo --list lacks %s (%s)", s.Name, s.Expect)
		}
	}
	if _, stderr, code := run(t, "demo", "no-such-scenario"); code != 2 || !strings.Contains(stderr, "no scenario") {
		t.Errorf("unknown scenario: exit %d, %q", code, stderr)
	}
}

// TestDemoRecordingsGolden judges two committed scenario recordings
// (gpufeed demo NAME --record) with gpufeed report: the text must lead with
// the verdict, three lines of evidence and the decision (a reader who stops
// after five lines knows what is wrong and what to change), and match its
// golden file (go test -update rewrites it).
func TestDemoRecordingsGolden(t *testing.T) {
	for _, tc := range []struct{ name, class string }{
		{"demo-sync-bound", "sync-bound"},
		{"demo-storage-bound", "storage-bound"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := run(t, "report", filepath.Join("testdata", tc.name+".gpufeed"))
			if code != 0 || stderr != "" {
				t.Fatalf("report: exit %d, stderr %q", code, stderr)
			}
			lines := strings.Split(out, "\n")
			if len(lines) < 5 || !strings.HasPrefix(lines[0], "VERDICT: "+tc.class+" (confidence ") ||
				!strings.HasPrefix(lines[1], "  - ") || !strings.HasPrefix(lines[2], "  - ") || !strings.HasPrefix(lines[3], "  - ") ||
				!strings.HasPrefix(lines[4], "DECISION: ") {
				t.Errorf("the first five lines are not verdict, three evidence lines, decision:\n%s", strings.Join(lines[:min(6, len(lines))], "\n"))
			}
			golden.Check(t, filepath.Join("testdata", tc.name+".text"), out)
		})
	}
}
