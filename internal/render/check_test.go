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
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b") || !strings.Contains(out, "x?[31m") || !strings.Contains(out, "bad?line") {
		t.Errorf("control characters not stripped:\n%s", out)
	}
	if rep.ExitStatus != CheckExitFailed || !strings.Contains(out, "speed: 8 GT/s  [/sys/x]") || !strings.Contains(out, "— needs more") {
		t.Errorf("report:\n%s", out)
	}
	if strings.Index(out, "FAIL") > strings.Index(out, "ok:") {
		t.Error("failures must come before the ok list")
	}
	for v, s := range map[float64]string{8: "8", 7.875: "7.88", 31.5: "31.5", 1203: "1203", 0.48: "0.48", 92.06: "92.1"} {
		if got := formatNumber(v); got != s {
			t.Errorf("formatNumber(%v) = %s, want %s", v, got, s)
		}
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
	var text, js strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{text.String(), js.String()} {
		for _, c := range []string{"\u202e", "\u2028", "\u2029", "\u2066"} {
			if strings.Contains(out, c) {
				t.Errorf("output holds %U", []rune(c)[0])
			}
		}
	}
	for _, line := range strings.Split(text.String(), "\n") {
		if len(line) > 1200 {
			t.Errorf("a %d-byte line: %.80s...", len(line), line)
		}
	}
	var back CheckReport
	if err := json.Unmarshal([]byte(js.String()), &back); err != nil || back.Results[0].Claim != evil {
		t.Errorf("JSON must keep the value (escaped): %v %q", err, back.Results[0].Claim)
	}
}
