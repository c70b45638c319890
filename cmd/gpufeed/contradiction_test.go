package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
)

// reportView is what the contradiction test reads of one report, from its
// JSON: the verdict, each finding (what class it supports), and how busy
// the GPU was over the window (NaN: not known).
type reportView struct {
	what    string
	verdict struct {
		Class    string   `json:"class"`
		Summary  string   `json:"summary"`
		Missing  string   `json:"missing"`
		Decision string   `json:"decision"`
		Because  []string `json:"because"`
	}
	findings []viewFinding
	gpuBusy  float64
}

type viewFinding struct {
	ID       string `json:"id"`
	Severity string `json:"severity"`
	Supports string `json:"supports"`
	Subject  string `json:"subject"`
	Claim    string `json:"claim"`
}

// traceSupports: a trace finding's JSON does not say which class it
// supports; the cause findings are tracejudge.CauseID's.
var traceSupports = func() map[string]string {
	m := map[string]string{}
	for c, id := range tracejudge.CauseID {
		m[id] = string(c)
	}
	return m
}()

// cpuClasses are the classes that say the CPU side is what delays the GPU.
var cpuClasses = map[string]bool{string(finding.SubmissionBound): true, string(finding.Preprocessing): true}

func alarming(sev string) bool { return sev == "warning" || sev == "critical" }

// clearsCPU: the verdict says the CPU is not what delays the work: a
// gpu-bound verdict, or a verdict that says so in words.
func (r *reportView) clearsCPU() bool {
	if r.verdict.Class == string(finding.GPUBound) {
		return true
	}
	text := strings.ToLower(r.verdict.Summary + " " + r.verdict.Missing)
	for _, s := range []string{"not on the cpu", "the cpu is not", "cpu is not what delays"} {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}

// contradictions lists the pairs of statements of one report that cannot
// both be true.
func (r *reportView) contradictions() []string {
	var out []string
	byID := map[string]viewFinding{}
	for _, f := range r.findings {
		byID[f.ID] = f
	}
	busyKnown := !math.IsNaN(r.gpuBusy)
	// The CPU cleared beside a warning that the CPU is the cause.
	if r.clearsCPU() {
		for _, f := range r.findings {
			if alarming(f.Severity) && cpuClasses[f.Supports] {
				out = append(out, fmt.Sprintf("the verdict (%s) clears the CPU (%q) beside %s %s, a %s cause: %q",
					r.verdict.Class, r.verdict.Summary, strings.ToUpper(f.Severity), f.ID, f.Supports, f.Claim))
			}
		}
	}
	// Busy beside idle.
	if r.verdict.Class == string(finding.GPUBound) {
		if busyKnown && r.gpuBusy < 50 {
			out = append(out, fmt.Sprintf("gpu-bound, the GPU busy, while it was busy %.1f %% of the window", r.gpuBusy))
		}
		if f, ok := byID["gpu-idle"]; ok && alarming(f.Severity) {
			out = append(out, fmt.Sprintf("gpu-bound beside %s gpu-idle: %q", f.Severity, f.Claim))
		}
	}
	if (r.verdict.Class == string(finding.Idle) || r.verdict.Class == string(finding.Stalled)) && busyKnown && r.gpuBusy >= 50 {
		out = append(out, fmt.Sprintf("%s while the GPU was busy %.1f %% of the window", r.verdict.Class, r.gpuBusy))
	}
	if f, ok := byID["job-idle"]; ok {
		if g, ok := byID["gpu-busy"]; ok {
			out = append(out, fmt.Sprintf("job-idle (%q) beside gpu-busy (%q)", f.Claim, g.Claim))
		}
	}
	if f, ok := byID["gpu-idle"]; ok && alarming(f.Severity) {
		if g, ok := byID["gpu-busy"]; ok {
			out = append(out, fmt.Sprintf("gpu-busy (%q) beside %s gpu-idle (%q)", g.Claim, f.Severity, f.Claim))
		}
	}
	// Throttled at low load: a clock warning about a GPU mostly idle.
	for _, id := range []string{"gpu-clocks", "gpu-clocks-low-under-load"} {
		if f, ok := byID[id]; ok && alarming(f.Severity) && busyKnown && r.gpuBusy < 50 {
			out = append(out, fmt.Sprintf("%s %s (%q) about a GPU busy %.1f %% of the window", strings.ToUpper(f.Severity), id, f.Claim, r.gpuBusy))
		}
	}
	return out
}

// viewsOf reads the reports of a JSON output: a diagnose report (one
// verdict) or a trace report (one per rank).
func viewsOf(t *testing.T, what string, data []byte) []reportView {
	t.Helper()
	var doc struct {
		Verdict  *json.RawMessage `json:"verdict"`
		Findings []viewFinding    `json:"findings"`
		GPUs     []struct {
			UtilMean *float64 `json:"util_mean_percent"`
		} `json:"gpus"`
		Reports []struct {
			Rank     int             `json:"rank"`
			Verdict  json.RawMessage `json:"verdict"`
			Findings []viewFinding   `json:"findings"`
			Shares   struct {
				Idle float64 `json:"idle_percent"`
			} `json:"shares"`
			Scope struct {
				GPUOps int `json:"gpu_ops"`
			} `json:"scope"`
		} `json:"reports"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: not JSON: %v", what, err)
	}
	var out []reportView
	if doc.Verdict != nil {
		v := reportView{what: what, findings: doc.Findings, gpuBusy: math.NaN()}
		json.Unmarshal(*doc.Verdict, &v.verdict)
		for _, g := range doc.GPUs {
			if g.UtilMean != nil && (math.IsNaN(v.gpuBusy) || *g.UtilMean > v.gpuBusy) {
				v.gpuBusy = *g.UtilMean
			}
		}
		out = append(out, v)
	}
	for _, r := range doc.Reports {
		v := reportView{what: fmt.Sprintf("%s rank %d", what, r.Rank), findings: r.Findings, gpuBusy: math.NaN()}
		json.Unmarshal(r.Verdict, &v.verdict)
		if r.Scope.GPUOps > 0 {
			v.gpuBusy = 100 - r.Shares.Idle
		}
		for i := range v.findings {
			if v.findings[i].Supports == "" {
				v.findings[i].Supports = traceSupports[v.findings[i].ID]
			}
		}
		out = append(out, v)
	}
	return out
}

// TestNoReportContradictsItself: no two statements of one report
// contradict each other (the CPU cleared beside a warning that the CPU is
// the cause; the GPU busy beside the GPU idle; throttled at low load), over
// the report of every demo scenario's recording, every JSON golden, and
// every trace (testdata/traces and the shared traces, each rank), read
// from their JSON.
func TestNoReportContradictsItself(t *testing.T) {
	var views []reportView
	for _, rec := range demoRecordings(t) {
		out, stderr, code := run(t, "report", "-o", "json", rec)
		if code != 0 {
			t.Fatalf("report %s: exit %d: %s", rec, code, stderr)
		}
		views = append(views, viewsOf(t, rec, []byte(out))...)
	}
	goldens, _ := filepath.Glob("testdata/*.json")
	more, _ := filepath.Glob("../../testdata/golden/cli/*.json")
	for _, g := range append(goldens, more...) {
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		views = append(views, viewsOf(t, g, data)...)
	}
	for _, tr := range traceInputs(t) {
		out, stderr, code := run(t, "trace", "-o", "json", tr)
		if code != 0 {
			t.Fatalf("trace %s: exit %d: %s", tr, code, stderr)
		}
		views = append(views, viewsOf(t, tr, []byte(out))...)
	}
	if len(views) < 50 {
		t.Fatalf("read %d reports, want every recording, golden and trace", len(views))
	}
	for _, v := range views {
		for _, c := range v.contradictions() {
			t.Errorf("%s: %s", v.what, c)
		}
	}
}

// TestContradictionsAreFound: the checker finds each kind of contradiction
// (so the test above can fail), and not in a report that agrees with itself.
func TestContradictionsAreFound(t *testing.T) {
	mk := func(class, summary string, busy float64, fs ...viewFinding) reportView {
		v := reportView{what: class, findings: fs, gpuBusy: busy}
		v.verdict.Class, v.verdict.Summary = class, summary
		return v
	}
	saturated := viewFinding{ID: "launch-thread-saturated", Severity: "warning", Supports: "submission-bound", Claim: "The CPU cannot launch fast enough"}
	for _, tc := range []struct {
		v    reportView
		want int
	}{
		{mk("inconclusive", "The GPU is idle 54 % of the time, mostly waiting on its own dependencies, not on the CPU.", 46, saturated), 1},
		{mk("gpu-bound", "the CPU is not the bottleneck", 98, saturated), 1},
		{mk("gpu-bound", "busy", 6), 1},
		{mk("gpu-bound", "busy", 95, viewFinding{ID: "gpu-idle", Severity: "warning"}), 1},
		{mk("idle", "nothing to do", 80), 1},
		{mk("stalled", "nothing moves", 90), 1},
		{mk("inconclusive", "", math.NaN(), viewFinding{ID: "job-idle", Severity: "info"}, viewFinding{ID: "gpu-busy", Severity: "info"}), 1},
		{mk("inconclusive", "", 5.7, viewFinding{ID: "gpu-clocks", Severity: "warning", Claim: "SM clock 1721 MHz of 1980 while 100% busy: throttled"}), 1},
		{mk("submission-bound", "The CPU cannot launch fast enough", 60, saturated), 0},
		{mk("gpu-bound", "busy", 95, viewFinding{ID: "gpu-clocks", Severity: "warning"}), 0},
	} {
		if got := tc.v.contradictions(); len(got) != tc.want {
			t.Errorf("%s %q: %d contradictions %q, want %d", tc.v.verdict.Class, tc.v.verdict.Summary, len(got), got, tc.want)
		}
	}
}
