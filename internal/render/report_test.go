package render

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func TestClean(t *testing.T) {
	for in, want := range map[string]string{
		"pt_main_thread":     "pt_main_thread",
		"\x1b[31mred\x1b[0m": "?[31mred?[0m",
		"a\nb\rc\td":         "a?b?c?d",
		"\u009b2J":           "?2J", // C1 CSI
		"ok\u2028line":       "ok?line",
		"caf\xc3\xa9 \xff":   "café ?",
	} {
		if got := Clean(in); got != want {
			t.Errorf("Clean(%q) = %q, want %q", in, got, want)
		}
	}
	if got := CleanArgs([]string{"python3", "-c", "print('x')\x1b]0;pwned\x07"}); strings.ContainsAny(got, "\x1b\x07") {
		t.Errorf("CleanArgs kept control characters: %q", got)
	}
}

// hostile is a timeline whose names try to forge terminal output.
func hostile() *timeline.Timeline {
	pk := timeline.ProcKey{PID: 7, StartTime: 1}
	tk := timeline.ThreadKey{TID: 7, StartTime: 1}
	tl := &timeline.Timeline{
		Meta: timeline.Meta{Tool: "gpufeed test", NumCPU: 1, ClockTick: 100, PageSize: 4096,
			Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Interval: timeline.Duration(100 * time.Millisecond),
			Target: timeline.Target{PID: 7, StartTime: 1}},
		Procs:   map[timeline.ProcKey]*timeline.ProcInfo{pk: {Key: pk, Comm: "evil\x1b[2J", Cmdline: []string{"evil\x1b]0;title\x07", "--x"}}},
		Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{tk: {Key: tk, PID: 7, Comm: "\x1b[31mpt_main\r", LastSeen: 100}},
	}
	for i := 0; i < 2; i++ {
		tl.Ticks = append(tl.Ticks, timeline.Tick{T: int64(i) * 100_000_000,
			Threads: []timeline.ThreadSample{{TID: 7, PID: 7, State: 'S', RunNS: uint64(i) * 1e7,
				Blocked: &timeline.Blocked{Syscall: "read", On: "/data/\x1b[1mx"}}},
			Procs: []timeline.ProcSample{{PID: 7, Threads: 1, RSSPages: 1}}})
	}
	return tl
}

func TestTextStripsControlCharacters(t *testing.T) {
	tl := hostile()
	r := Build(tl, derive.New(tl), nil, nil, nil)
	var buf bytes.Buffer
	if err := Text(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, c := range []string{"\x1b", "\x07", "\r"} {
		if strings.Contains(out, c) {
			t.Errorf("text output contains %q:\n%s", c, out)
		}
	}
	if !strings.Contains(out, "evil?[2J") || !strings.Contains(out, "/data/?[1mx") {
		t.Errorf("names should be shown, cleaned:\n%s", out)
	}
	// Without a verdict the report starts with the tables.
	if !strings.HasPrefix(out, "gpufeed observation:") {
		t.Errorf("no verdict: want the header first, got %q", out[:40])
	}
}

func TestTextWithoutVerdictStillShowsFindingsAfterTheTables(t *testing.T) {
	tl := hostile()
	fs := []finding.Finding{{ID: "fd-limit-low", Severity: finding.Warning, Claim: "soft limit 1024", Decision: "raise it"}}
	r := Build(tl, derive.New(tl), nil, fs, nil)
	var buf bytes.Buffer
	Text(&buf, r)
	out := buf.String()
	iTables, iFindings := strings.Index(out, "PROCESSES"), strings.Index(out, "FINDINGS\n  WARNING fd-limit-low: soft limit 1024\n      change: raise it")
	if iFindings < 0 || iFindings < iTables {
		t.Errorf("findings must follow the tables when there is no verdict:\n%s", out)
	}
}

func TestTextLeadsWithVerdictThenDecisionThenFindings(t *testing.T) {
	tl := hostile()
	v := &finding.Verdict{Class: finding.SubmissionBound, Confidence: 0.8, Summary: "the launch thread is saturated",
		Because: []string{"launch-thread-saturated"}, Decision: "capture the step in a CUDA graph"}
	fs := []finding.Finding{
		{ID: "cpu-oversubscribed", Severity: finding.Info, Claim: "more runnable threads than cores"},
		{ID: "launch-thread-saturated", Severity: finding.Warning, Claim: "pt_main_thread at 98% of a core",
			Evidence: []finding.Evidence{{What: "launch thread CPU p50", Value: 98, Unit: "%", Window: "p50 of 100 samples over 10.0 s", Source: "/proc/7/task/7/schedstat"}}},
		{ID: "gpu-clocks-drop", Severity: finding.Warning, Claim: "SM clock falls between bursts", Decision: "persistence mode"},
	}
	r := Build(tl, derive.New(tl), v, fs, nil)
	var buf bytes.Buffer
	Text(&buf, r)
	lines := strings.Split(buf.String(), "\n")
	if !strings.HasPrefix(lines[0], "VERDICT: submission-bound (confidence 80%): the launch thread is saturated") {
		t.Errorf("line 1: %q", lines[0])
	}
	if lines[1] != "  - launch thread CPU p50: 98% (p50 of 100 samples over 10.0 s; /proc/7/task/7/schedstat)" {
		t.Errorf("line 2 (evidence): %q", lines[1])
	}
	if lines[2] != "DECISION: capture the step in a CUDA graph" {
		t.Errorf("line 3: %q", lines[2])
	}
	rest := strings.Join(lines[3:], "\n")
	iFindings, iVerdict, iWarn, iInfo, iTables := strings.Index(rest, "FINDINGS"), strings.Index(rest, "launch-thread-saturated (verdict)"),
		strings.Index(rest, "gpu-clocks-drop"), strings.Index(rest, "cpu-oversubscribed"), strings.Index(rest, "PROCESSES")
	if !(iFindings >= 0 && iFindings < iVerdict && iVerdict < iWarn && iWarn < iInfo && iInfo < iTables) {
		t.Errorf("order: findings (the verdict's, then warning before info) then tables:\n%s", rest)
	}
}

func TestJSONHasSchemaVersionAndNoNaN(t *testing.T) {
	tl := hostile()
	a := derive.New(tl)
	r := Build(tl, a, nil, nil, []string{"a note"})
	var buf bytes.Buffer
	if err := JSON(&buf, r); err != nil {
		t.Fatalf("JSON must never fail on unmeasured (NaN) values: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	if m["schema_version"] != float64(SchemaVersion) {
		t.Errorf("schema_version %v", m["schema_version"])
	}
	p := m["processes"].([]any)[0].(map[string]any)
	if p["pss_bytes"] != nil || p["fds"] != nil {
		t.Errorf("unmeasured values must be null, got pss %v fds %v", p["pss_bytes"], p["fds"])
	}
	if math.IsNaN(*r.Processes[0].RSSBytes) {
		t.Error("RSS was measured")
	}
}

// The events list the kernel log lines about the job's processes and the
// GPUs; other processes' kills are counted, not listed.
func TestKernelLinesOfOtherProcessesAreCounted(t *testing.T) {
	tl := hostile()
	tl.Events = []timeline.Event{
		{T: -5e9, Kind: "kmsg", PID: 7, Text: "Out of memory: Killed process 7 (python3) total-vm:1000kB, anon-rss:900kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0"},
		{T: -4e9, Kind: "kmsg", PID: 4242, Text: "Out of memory: Killed process 4242 (java) total-vm:1000kB, anon-rss:900kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:4kB oom_score_adj:0"},
		{T: -3e9, Kind: "kmsg", Text: "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus."},
	}
	r := Build(tl, derive.New(tl), nil, nil, nil)
	if len(r.Events) != 2 || r.Events[0].PID != 7 || !strings.Contains(r.Events[1].Text, "Xid") || r.KernelLinesOther != 1 {
		t.Fatalf("events %+v, other %d: want the job's kill and the Xid listed, the other process's kill counted", r.Events, r.KernelLinesOther)
	}
	var buf bytes.Buffer
	if err := Text(&buf, r); err != nil {
		t.Fatal(err)
	}
	if out := buf.String(); strings.Contains(out, "java") || !strings.Contains(out, "KERNEL LOG: 1 lines about other processes") {
		t.Errorf("text:\n%s", out)
	}
}

// TestTextSaysWhatConfidenceIsMadeOf: the verdict's basis follows the
// decision as the CONFIDENCE line, cleaned like any other text.
func TestTextSaysWhatConfidenceIsMadeOf(t *testing.T) {
	tl := hostile()
	v := &finding.Verdict{Class: finding.Idle, Confidence: 0.54, Summary: "The job is idle", Because: []string{"job-idle"},
		Decision: "send it requests", Basis: "54% = 90% (every wait read\x1b[2J) × 60% for the evidence held (3.0 s judged; 5 s or more count in full)"}
	r := Build(tl, derive.New(tl), v, []finding.Finding{{ID: "job-idle", Claim: "The job is idle"}}, nil)
	var buf bytes.Buffer
	Text(&buf, r)
	lines := strings.Split(buf.String(), "\n")
	if lines[1] != "DECISION: send it requests" || !strings.HasPrefix(lines[2], "CONFIDENCE: 54% = 90% (every wait read") ||
		strings.ContainsRune(lines[2], 0x1b) || !strings.HasSuffix(lines[2], "5 s or more count in full)") {
		t.Errorf("header:\n%s", strings.Join(lines[:3], "\n"))
	}
}

// The characters every output of gpufeed keeps off the terminal: line and
// paragraph separators and the bidirectional overrides and isolates, which
// reorder what a line shows (a name "\u202eexe.txt" reads "txt.exe").
var reorderers = []string{"\u2028", "\u2029", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c"}

func TestCleanRemovesSeparatorsAndBidiControls(t *testing.T) {
	for _, c := range reorderers {
		if got := Clean("a" + c + "b"); got != "a?b" {
			t.Errorf("Clean(%q) = %q, want a?b", "a"+c+"b", got)
		}
	}
}

// A hostile name in the JSON report is escaped (\u202e), so the document
// decodes to the same name and shows no reordering on a terminal.
func TestJSONEscapesBidiControls(t *testing.T) {
	tl := hostile()
	tl.Procs[timeline.ProcKey{PID: 7, StartTime: 1}].Comm = "gpu\u202eexe.txt\u2066\u2028"
	r := Build(tl, derive.New(tl), nil, nil, nil)
	var buf bytes.Buffer
	if err := JSON(&buf, r); err != nil {
		t.Fatal(err)
	}
	for _, c := range reorderers {
		if strings.Contains(buf.String(), c) {
			t.Errorf("JSON output holds %U", []rune(c)[0])
		}
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Processes[0].Comm != "gpu\u202eexe.txt\u2066\u2028" {
		t.Errorf("the name changed: %q", back.Processes[0].Comm)
	}
}

// A 2 MB event text (a recording can hold any) prints as one capped line in
// text, and is capped in JSON too.
func TestLongTextIsCapped(t *testing.T) {
	tl := hostile()
	tl.Events = append(tl.Events, timeline.Event{T: 1, Kind: timeline.EventReadError, PID: 7, Text: strings.Repeat("x", 2<<20)})
	r := Build(tl, derive.New(tl), nil, nil, nil)
	var text, js bytes.Buffer
	if err := Text(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text.String(), "\n") {
		if len(line) > 1200 {
			t.Fatalf("a %d-byte line: %.80s...", len(line), line)
		}
	}
	if !strings.Contains(text.String(), "more bytes cut") {
		t.Error("the cut is not said")
	}
	if js.Len() > 64<<10 {
		t.Errorf("JSON report of %d bytes", js.Len())
	}
}
