package render

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// The JSON renderer: one encoder for every document (docs/JSON.md, the
// schema docs/gpufeed.schema.json). What it enforces for all of them:
//
//   - every document starts with the Header;
//   - keys are snake_case and carry one unit suffix per kind (_ns, _bytes,
//     _percent, _per_sec...): the views below convert what the judges keep
//     in other units (microsecond distributions, 0-1 confidences);
//   - a value that is absent or is text is null, never a dummy 0;
//   - floats are rounded to what was measured: keys ending in _ns, _bytes
//     or _ticks hold whole numbers, other floats keep three decimals;
//   - bidirectional controls in strings are escaped (safetext.EscapeJSON),
//     and HTML characters are not (no \u003c for "<").
type jsonRenderer struct{}

// header is h as written: the schema version and tool are the renderer's,
// whatever the caller filled.
func header(h Header) Header {
	h.SchemaVersion, h.Tool = SchemaVersion, "gpufeed"
	if h.GeneratedAt == "" {
		h.GeneratedAt = Now().UTC().Format(time.RFC3339)
	}
	return h
}

func (jsonRenderer) Diagnose(w io.Writer, r *Report, _ Options) error {
	return writeJSON(w, reportJSON{Header: header(r.Header), Verdict: verdictJSON(r.Verdict), Findings: findingsJSON(r.Findings), report: (*report)(r), Series: seriesJSON(r.Series)})
}

func (jsonRenderer) Check(w io.Writer, r *CheckReport, _ Options) error {
	return writeJSON(w, checkJSON(r))
}

func (jsonRenderer) Trace(w io.Writer, r *TraceReport, _ Options) error {
	return writeJSON(w, traceJSON(r))
}

// report is Report without its methods, so reportJSON can embed it.
type report Report

type reportJSON struct {
	Header
	Verdict  *jsonVerdict  `json:"verdict"`
	Findings []jsonFinding `json:"findings"`
	*report
	// Series is the judge's, interval by interval (null when no rules ran).
	Series *jsonSeries `json:"series"`
}

// jsonVerdict is a verdict as every JSON document writes it.
type jsonVerdict struct {
	Class             finding.Class `json:"class"`
	ConfidencePercent float64       `json:"confidence_percent"`
	ConfidenceBasis   string        `json:"confidence_basis,omitempty"`
	Summary           string        `json:"summary"`
	Because           []string      `json:"because"`
	Decision          string        `json:"decision,omitempty"`
	Missing           string        `json:"missing,omitempty"`
}

func verdictJSON(v *finding.Verdict) *jsonVerdict {
	if v == nil {
		return nil
	}
	because := v.Because
	if because == nil {
		because = []string{}
	}
	return &jsonVerdict{Class: v.Class, ConfidencePercent: math.Round(v.Confidence * 100), ConfidenceBasis: v.Basis,
		Summary: v.Summary, Because: because, Decision: v.Decision, Missing: v.Missing}
}

// jsonFinding is a finding as every JSON document writes it.
type jsonFinding struct {
	ID       string           `json:"id"`
	Severity finding.Severity `json:"severity"`
	Subject  string           `json:"subject,omitempty"`
	Claim    string           `json:"claim"`
	Evidence []jsonEvidence   `json:"evidence"`
	Decision string           `json:"decision,omitempty"`
	Supports finding.Class    `json:"supports,omitempty"`
}

// jsonEvidence is one piece of evidence: a value in its unit, or a text
// (then value is null).
type jsonEvidence struct {
	What   string   `json:"what"`
	Value  *float64 `json:"value"`
	Unit   string   `json:"unit,omitempty"`
	Text   string   `json:"text,omitempty"`
	Window string   `json:"window,omitempty"`
	Source string   `json:"source,omitempty"`
}

func evidenceJSON(es []finding.Evidence) []jsonEvidence {
	out := make([]jsonEvidence, 0, len(es))
	for _, e := range es {
		j := jsonEvidence{What: e.What, Unit: e.Unit, Text: e.Text, Window: e.Window, Source: e.Source}
		if e.Text == "" && !math.IsNaN(e.Value) && !math.IsInf(e.Value, 0) {
			v := e.Value
			j.Value = &v
		}
		if e.Text != "" {
			j.Unit = ""
		}
		out = append(out, j)
	}
	return out
}

func findingJSON(f finding.Finding) jsonFinding {
	return jsonFinding{ID: f.ID, Severity: f.Severity, Subject: f.Subject, Claim: f.Claim,
		Evidence: evidenceJSON(f.Evidence), Decision: f.Decision, Supports: f.Supports}
}

func findingsJSON(fs []finding.Finding) []jsonFinding {
	out := make([]jsonFinding, 0, len(fs))
	for _, f := range fs {
		out = append(out, findingJSON(f))
	}
	return out
}

// writeJSON encodes v, rounds its floats (roundNumbers), indents it and
// escapes bidirectional controls.
func writeJSON(w io.Writer, v any) error {
	return encodeJSON(w, v, func(out *bytes.Buffer, b []byte) error { return json.Indent(out, b, "", "  ") })
}

// encodeJSON encodes v, rounds its floats, lays the text out (indented or
// compact) and escapes bidirectional controls, one document per line end.
func encodeJSON(w io.Writer, v any, layout func(*bytes.Buffer, []byte) error) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	rounded, err := roundNumbers(buf.Bytes())
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := layout(&out, rounded); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(safetext.EscapeJSON(out.Bytes()))
	return err
}

// wholeKey reports whether a key holds a whole number by its unit:
// nanoseconds, bytes and clock ticks are counted, not measured in parts.
func wholeKey(k string) bool {
	for _, s := range []string{"_ns", "_bytes", "_ticks", "_bytes_per_sec"} {
		if strings.HasSuffix(k, s) {
			return true
		}
	}
	return k == "ns"
}

// roundNumbers rewrites the numbers of a compact JSON document: under a
// key that counts whole units (wholeKey) to an integer, any other
// fractional number to at most three decimals. Keys keep their order.
func roundNumbers(doc []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var out bytes.Buffer
	str := json.NewEncoder(&out)
	str.SetEscapeHTML(false)
	// stack holds, per open container, whether it is an object, whether
	// the next token in it is a key, and whether it has had an element.
	type frame struct{ object, wantKey, started bool }
	var stack []frame
	key := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			out.WriteByte(byte(d))
			stack = stack[:len(stack)-1]
			if n := len(stack); n > 0 && stack[n-1].object {
				stack[n-1].wantKey = true
			}
			continue
		}
		top := len(stack) - 1
		isKey := top >= 0 && stack[top].object && stack[top].wantKey
		if top >= 0 && (isKey || !stack[top].object) {
			if stack[top].started {
				out.WriteByte(',')
			}
			stack[top].started = true
		}
		switch t := tok.(type) {
		case json.Delim:
			out.WriteByte(byte(t))
			stack = append(stack, frame{object: t == '{', wantKey: t == '{'})
			continue
		case string:
			if err := str.Encode(t); err != nil {
				return nil, err
			}
			out.Truncate(out.Len() - 1) // Encode's newline
			if isKey {
				key = t
				out.WriteByte(':')
				stack[top].wantKey = false
				continue
			}
		case json.Number:
			out.WriteString(roundNumber(t, wholeKey(key)))
		case bool:
			out.WriteString(strconv.FormatBool(t))
		case nil:
			out.WriteString("null")
		default:
			return nil, fmt.Errorf("render: unexpected JSON token %v", tok)
		}
		if top >= 0 && stack[top].object {
			stack[top].wantKey = true
		}
	}
	return out.Bytes(), nil
}

func roundNumber(n json.Number, whole bool) string {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		return s
	}
	f, err := n.Float64()
	if err != nil {
		return s
	}
	if whole {
		return strconv.FormatFloat(math.Round(f), 'f', -1, 64)
	}
	r := math.Round(f*1000) / 1000
	if r == 0 {
		return "0"
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// UnmarshalJSON reads a report back from its JSON (tests and tools that
// drive gpufeed): the shared views of the verdict and findings back into
// the finding types (confidence as a share of one again, a text
// evidence's null value as 0).
func (r *Report) UnmarshalJSON(b []byte) error {
	d := reportJSON{report: (*report)(r)}
	if err := json.Unmarshal(b, &d); err != nil {
		return err
	}
	r.Header = d.Header
	r.Series = d.Series.series()
	if v := d.Verdict; v != nil {
		r.Verdict = &finding.Verdict{Class: v.Class, Confidence: v.ConfidencePercent / 100, Basis: v.ConfidenceBasis,
			Summary: v.Summary, Because: v.Because, Decision: v.Decision, Missing: v.Missing}
	}
	r.Findings = nil
	for _, f := range d.Findings {
		out := finding.Finding{ID: f.ID, Severity: f.Severity, Subject: f.Subject, Claim: f.Claim, Decision: f.Decision, Supports: f.Supports,
			Evidence: []finding.Evidence{}}
		for _, e := range f.Evidence {
			ev := finding.Evidence{What: e.What, Unit: e.Unit, Text: e.Text, Window: e.Window, Source: e.Source}
			if e.Value != nil {
				ev.Value = *e.Value
			}
			out.Evidence = append(out.Evidence, ev)
		}
		r.Findings = append(r.Findings, out)
	}
	return nil
}
