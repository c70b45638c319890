package render

import (
	"bytes"
	"testing"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
)

// textOf renders doc as text with o.
func textOf(t testing.TB, doc Document, o Options) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, FormatText, doc, o); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// jsonOf renders doc as JSON.
func jsonOf(t testing.TB, doc Document) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, FormatJSON, doc, Options{}); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	return b.Bytes()
}

var verbose = Options{Verbose: true}

// judged is a judgement of a verdict and findings written by hand, its
// findings in the order the judge gives them (the verdict's own first).
func judged(v *finding.Verdict, fs []finding.Finding) *judge.Judgement {
	fs = append([]finding.Finding(nil), fs...)
	finding.VerdictFirst(v, fs)
	return &judge.Judgement{Verdict: v, Findings: fs}
}
