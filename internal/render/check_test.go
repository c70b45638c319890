package render

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/finding"
)

func TestReportText(t *testing.T) {
	rep := NewCheckReport([]finding.CheckOutcome{
		{ID: "a", Status: finding.CheckFail, Severity: finding.Critical, Subject: "x\x1b[31m", Claim: "bad\nline",
			Evidence: []finding.Evidence{{What: "speed", Value: 8, Unit: "GT/s", Source: "/sys/x"}}, Decision: "fix"},
		{ID: "b", Status: finding.CheckOK, Claim: "fine"},
		{ID: "c", Status: finding.CheckAbsent, Claim: "none", Need: "more"},
	})
	out := textOf(t, rep, verbose)
	if strings.ContainsAny(out, "\x1b") || !strings.Contains(out, "x?[31m") || !strings.Contains(out, "bad?line") {
		t.Errorf("control characters not stripped:\n%s", out)
	}
	if rep.ExitStatus != CheckExitFailed || !strings.Contains(out, "speed: 8 GT/s (/sys/x)") || !strings.Contains(out, "— needs more") {
		t.Errorf("report:\n%s", out)
	}
	if strings.Index(out, "FAIL") > strings.Index(out, "ok:") {
		t.Error("failures must come before the ok list")
	}

	// By default: the failure on one line, what passed or was absent folded
	// into one count line.
	lines := strings.Split(strings.TrimSuffix(textOf(t, rep, Options{}), "\n"), "\n")
	want := []string{"gpufeed check: no GPU driver source", "FAIL  a [x?[31m]: bad?line",
		"1 failed, 0 warnings, 0 errors; 1 ok, 1 absent or not applicable, 0 not visible (-v lists them)",
		"exit status 1: a check failed", ExplainHint}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("default:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	// --quiet: the failures only.
	if q := textOf(t, rep, Options{Quiet: true}); q != "FAIL  a [x?[31m]: bad?line\n" {
		t.Errorf("quiet: %q", q)
	}
}

// Mount sources, device names and files quoted in errors come from the
// machine: line separators and bidirectional controls reach neither output
// as they are, and 5 KB of garbage in a malformed file prints as one capped
// line.
func TestReportKeepsHostileTextOffTheTerminal(t *testing.T) {
	evil := "src\u202eexe.txt\u2028forged\u2066\u2029"
	garbage := strings.Repeat("}{garbage", 600)
	rep := NewCheckReport([]finding.CheckOutcome{
		{ID: "a", Status: finding.CheckWarn, Subject: evil, Claim: evil, Evidence: []finding.Evidence{{What: evil, Text: evil, Source: evil}}, Decision: evil},
		{ID: "b", Status: finding.CheckError, Claim: "memory: /proc/meminfo:1: malformed line " + garbage, Need: "a well-formed /proc/meminfo"},
		{ID: "c", Status: finding.CheckOK, Subject: evil, Claim: garbage},
	})
	rep.DataPath = evil
	text, js := textOf(t, rep, verbose), string(jsonOf(t, rep))
	for _, out := range []string{text, textOf(t, rep, Options{}), js} {
		for _, c := range []string{"\u202e", "\u2028", "\u2029", "\u2066"} {
			if strings.Contains(out, c) {
				t.Errorf("output holds %U", []rune(c)[0])
			}
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if len(line) > 1200 {
			t.Errorf("a %d-byte line: %.80s...", len(line), line)
		}
	}
	var back checkDoc
	if err := json.Unmarshal([]byte(js), &back); err != nil || back.Results[0].Claim != evil {
		t.Errorf("JSON must keep the value (escaped): %v %q", err, back.Results[0].Claim)
	}
}
