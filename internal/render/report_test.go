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
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

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
	r := Build(tl, derive.New(tl), nil, nil)
	out := textOf(t, r, verbose)
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
	r := Build(tl, derive.New(tl), judged(nil, fs), nil)
	out := textOf(t, r, verbose)
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
	r := Build(tl, derive.New(tl), judged(v, fs), nil)

	// The default report: verdict, its numbers, decision, one line per
	// other finding (warnings first), the run's line.
	lines := strings.Split(textOf(t, r, Options{}), "\n")
	want := []string{
		"VERDICT: submission-bound (confidence 80%): the launch thread is saturated",
		"  - launch thread CPU p50: 98%",
		"DECISION: capture the step in a CUDA graph",
		"  WARNING gpu-clocks-drop: SM clock falls between bursts",
		"  INFO cpu-oversubscribed: more runnable threads than cores",
	}
	for i, w := range want {
		if i >= len(lines) || lines[i] != w {
			t.Errorf("default line %d: %q, want %q", i+1, lines[min(i, len(lines)-1)], w)
		}
	}
	if !strings.HasPrefix(lines[5], "pid 7 (evil?[2J) on ") {
		t.Errorf("default line 6 (the run): %q", lines[5])
	}

	// Verbose: the verdict, then the decision, then every finding with its
	// evidence (the verdict's first, then warning before info), then the tables.
	out := textOf(t, r, verbose)
	lines = strings.Split(out, "\n")
	if lines[0] != want[0] || lines[1] != want[2] {
		t.Errorf("verbose header:\n%s", strings.Join(lines[:3], "\n"))
	}
	if strings.Count(out, "capture the step in a CUDA graph") != 1 || strings.Count(out, "launch thread CPU p50") != 1 {
		t.Errorf("verbose says the decision or the evidence twice:\n%s", out)
	}
	iFindings, iVerdict, iEvidence, iWarn, iInfo, iTables := strings.Index(out, "FINDINGS"), strings.Index(out, "launch-thread-saturated (verdict)"),
		strings.Index(out, "      launch thread CPU p50: 98% (p50 of 100 samples over 10.0 s; /proc/7/task/7/schedstat)"),
		strings.Index(out, "gpu-clocks-drop"), strings.Index(out, "cpu-oversubscribed"), strings.Index(out, "PROCESSES")
	if !(iFindings >= 0 && iFindings < iVerdict && iVerdict < iEvidence && iEvidence < iWarn && iWarn < iInfo && iInfo < iTables) {
		t.Errorf("order: findings (the verdict's with its evidence, then warning before info) then tables:\n%s", out)
	}
}

func TestJSONHasSchemaVersionAndNoNaN(t *testing.T) {
	tl := hostile()
	a := derive.New(tl)
	r := Build(tl, a, nil, []string{"a note"})
	var m map[string]any
	if err := json.Unmarshal(jsonOf(t, r), &m); err != nil {
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
	a := derive.New(tl)
	jd := judge.Judge(tl, a)
	// The report takes each line as the judge recognised it: reworded
	// after the judgement, the lines keep their kinds and their places.
	for i := range tl.Events {
		tl.Events[i].Text = strings.ReplaceAll(tl.Events[i].Text, "Killed process", "Stopped task")
		tl.Events[i].Text = strings.ReplaceAll(tl.Events[i].Text, "Xid", "Xid-code")
	}
	r := Build(tl, a, jd, nil)
	if len(r.Events) != 2 || r.Events[0].PID != 7 || !strings.Contains(r.Events[1].Text, "Xid") || r.KernelLinesOther != 1 {
		t.Fatalf("events %+v, other %d: want the job's kill and the Xid listed, the other process's kill counted", r.Events, r.KernelLinesOther)
	}
	if r.Events[0].KernelKind != "oom-kill" || r.Events[1].KernelKind != "gpu-xid" {
		t.Errorf("events %+v: want the judge's kinds (oom-kill, gpu-xid)", r.Events)
	}
	if len(r.KernelEvents) != 3 || !r.KernelEvents[0].Job || r.KernelEvents[1].Job || !r.KernelEvents[2].Job || r.KernelEvents[2].Xid != 79 {
		t.Errorf("kernel events %+v: want the three lines recognised, the job's and the GPU's marked", r.KernelEvents)
	}
	if out := textOf(t, r, verbose); strings.Contains(out, "java") || !strings.Contains(out, "KERNEL LOG: 1 lines about other processes") {
		t.Errorf("text:\n%s", out)
	}
}

// TestTextSaysWhatConfidenceIsMadeOf: the verdict's basis follows the
// decision as the CONFIDENCE line, cleaned like any other text.
func TestTextSaysWhatConfidenceIsMadeOf(t *testing.T) {
	tl := hostile()
	v := &finding.Verdict{Class: finding.Idle, Confidence: 0.54, Summary: "The job is idle", Because: []string{"job-idle"},
		Decision: "send it requests", Basis: "54% = 90% (every wait read\x1b[2J) × 60% for the evidence held (3.0 s judged; 5 s or more count in full)"}
	r := Build(tl, derive.New(tl), judged(v, []finding.Finding{{ID: "job-idle", Claim: "The job is idle"}}), nil)
	lines := strings.Split(textOf(t, r, verbose), "\n")
	// -v wraps to the width: fold the CONFIDENCE line's continuations.
	for len(lines) > 3 && strings.HasPrefix(lines[3], "    ") {
		lines[2] += " " + strings.TrimLeft(lines[3], " ")
		lines = append(lines[:3], lines[4:]...)
	}
	if lines[1] != "DECISION: send it requests" || !strings.HasPrefix(lines[2], "CONFIDENCE: 54% = 90% (every wait read") ||
		strings.ContainsRune(lines[2], 0x1b) || !strings.HasSuffix(lines[2], "5 s or more count in full)") {
		t.Errorf("header:\n%s", strings.Join(lines[:3], "\n"))
	}
}

// The characters every output of gpufeed keeps off the terminal: line and
// paragraph separators and the bidirectional overrides and isolates, which
// reorder what a line shows (a name "\u202eexe.txt" reads "txt.exe").
var reorderers = []string{"\u2028", "\u2029", "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c"}

func TestTextKeepsSeparatorsAndBidiControlsOff(t *testing.T) {
	for _, c := range reorderers {
		tl := hostile()
		tl.Procs[timeline.ProcKey{PID: 7, StartTime: 1}].Comm = "a" + c + "b"
		r := Build(tl, derive.New(tl), nil, nil)
		for _, o := range []Options{{}, verbose} {
			out := textOf(t, r, o)
			if strings.Contains(out, c) || !strings.Contains(out, "a?b") {
				t.Errorf("%U: text holds it or lost the name:\n%s", []rune(c)[0], out)
			}
		}
	}
}

// A hostile name in the JSON report is escaped (\u202e), so the document
// decodes to the same name and shows no reordering on a terminal.
func TestJSONEscapesBidiControls(t *testing.T) {
	tl := hostile()
	tl.Procs[timeline.ProcKey{PID: 7, StartTime: 1}].Comm = "gpu\u202eexe.txt\u2066\u2028"
	r := Build(tl, derive.New(tl), nil, nil)
	buf := bytes.NewBuffer(jsonOf(t, r))
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
	r := Build(tl, derive.New(tl), nil, nil)
	text := bytes.NewBufferString(textOf(t, r, verbose))
	js := bytes.NewBuffer(jsonOf(t, r))
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
