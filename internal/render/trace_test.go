package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
)

// Names in a trace file are attacker-controlled: no control character may
// reach the terminal.
func TestTraceTextStripsControlCharacters(t *testing.T) {
	evil := "kernel\x1b]0;pwned\x07\x1b[31m\r\n"
	r := &tracejudge.RankReport{
		Source: "/tmp/" + evil + ".json",
		Rank:   -1,
		Verdict: finding.Verdict{Class: finding.SubmissionBound, Confidence: 0.9, Summary: "about " + evil,
			Because: []string{"x"}, Decision: "fix " + evil},
		Findings: []finding.Finding{{ID: "x", Claim: evil, Evidence: []finding.Evidence{{What: evil, Text: evil, Source: evil}}}},
		Attribution: tracestats.Attribution{SpanNs: 10, IdleNs: 5,
			TopOps:  []tracestats.NamedTime{{Name: evil, Ns: 5}},
			Longest: []tracestats.GapDetail{{DurNs: 5, Next: evil, Step: -1}}},
		Warnings: []string{evil},
	}
	for _, o := range []Options{{}, verbose} {
		out := textOf(t, &TraceReport{Reports: []*tracejudge.RankReport{r}}, o)
		for _, c := range []string{"\x1b", "\x07", "\r"} {
			if strings.Contains(out, c) {
				t.Fatalf("output holds control character %q:\n%q", c, out)
			}
		}
		if !strings.HasPrefix(out, "VERDICT: submission-bound") {
			t.Errorf("output does not lead with the verdict: %q", out[:40])
		}
	}
}

// Line separators and bidirectional controls in names from a trace file
// reach neither the text nor the JSON output as they are.
func TestTraceOutputsKeepReorderingCharactersOff(t *testing.T) {
	evil := "kernel\u202eexe.txt\u2028forged line\u2066\u2029"
	r := &tracejudge.RankReport{
		Source: "/tmp/" + evil + ".json",
		Rank:   -1,
		Verdict: finding.Verdict{Class: finding.SubmissionBound, Confidence: 0.9, Summary: "about " + evil,
			Because: []string{"x"}, Decision: "fix " + evil},
		Findings: []finding.Finding{{ID: "x", Claim: evil, Evidence: []finding.Evidence{{What: evil, Text: evil, Source: evil}}}},
		Attribution: tracestats.Attribution{SpanNs: 10, IdleNs: 5,
			TopOps:  []tracestats.NamedTime{{Name: evil, Ns: 5}},
			Longest: []tracestats.GapDetail{{DurNs: 5, Next: evil, Step: -1}}},
		Warnings: []string{evil},
	}
	res := &TraceReport{Reports: []*tracejudge.RankReport{r}}
	for _, out := range []*bytes.Buffer{bytes.NewBufferString(textOf(t, res, Options{})), bytes.NewBufferString(textOf(t, res, verbose)),
		bytes.NewBuffer(jsonOf(t, res))} {
		for _, c := range []string{"\u202e", "\u2028", "\u2029", "\u2066"} {
			if strings.Contains(out.String(), c) {
				t.Errorf("output holds %U:\n%.200q", []rune(c)[0], out.String())
			}
		}
	}
}
