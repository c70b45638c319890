// The output of gpufeed check: its outcomes as text for people and JSON
// for programs.

package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// Exit statuses of gpufeed check, so it can gate a Slurm prolog or a CI
// smoke test. 2 is gpufeed's own failure (bad flags, unreadable root).
const (
	CheckExitOK     = 0
	CheckExitFailed = 1
)

// CheckReport is what gpufeed check prints: the run's context and every outcome.
type CheckReport struct {
	Root      string `json:"root,omitempty"`
	PID       int    `json:"pid,omitempty"`
	DataPath  string `json:"data_path,omitempty"`
	GPUSource string `json:"gpu_source,omitempty"`
	// GPUNote says why no GPU source was used, when none was.
	GPUNote   string       `json:"gpu_note,omitempty"`
	WindowSec float64      `json:"window_s"`
	Summary   CheckSummary `json:"summary"`
	// ExitStatus is CheckExitFailed when a check failed, else CheckExitOK.
	ExitStatus int                    `json:"exit_status"`
	Results    []finding.CheckOutcome `json:"results"`
}

// CheckSummary counts outcomes by status.
type CheckSummary struct {
	Fail       int `json:"fail"`
	Warn       int `json:"warn"`
	Error      int `json:"error"`
	OK         int `json:"ok"`
	Absent     int `json:"absent"`
	NotVisible int `json:"not_visible"`
}

// NewCheckReport counts the outcomes and sets the exit status.
func NewCheckReport(results []finding.CheckOutcome) CheckReport {
	r := CheckReport{Results: results}
	for _, res := range results {
		switch res.Status {
		case finding.CheckFail:
			r.Summary.Fail++
		case finding.CheckWarn:
			r.Summary.Warn++
		case finding.CheckError:
			r.Summary.Error++
		case finding.CheckOK:
			r.Summary.OK++
		case finding.CheckAbsent:
			r.Summary.Absent++
		case finding.CheckNotVisible:
			r.Summary.NotVisible++
		}
	}
	if r.Summary.Fail > 0 {
		r.ExitStatus = CheckExitFailed
	}
	return r
}

// WriteJSON writes the report as indented JSON.
// Bidirectional controls in strings are escaped (safetext.EscapeJSON).
func (r CheckReport) WriteJSON(w io.Writer) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(r); err != nil {
		return err
	}
	_, err := w.Write(safetext.EscapeJSON(buf.Bytes()))
	return err
}

// WriteText writes failures and warnings first, each with its evidence and
// decision, then errors, then a compact list of what passed and of what was
// absent or not visible. Strings that come from the machine (mount sources,
// device names, process names) are stripped of control characters.
func (r CheckReport) WriteText(w io.Writer) error {
	var b strings.Builder
	var ctx []string
	if r.Root != "" {
		ctx = append(ctx, "root "+r.Root)
	}
	if r.PID > 0 {
		ctx = append(ctx, "pid "+strconv.Itoa(r.PID))
	}
	if r.DataPath != "" {
		ctx = append(ctx, "data "+r.DataPath)
	}
	if r.GPUSource != "" {
		ctx = append(ctx, "GPU source "+r.GPUSource)
	} else if r.GPUNote != "" {
		ctx = append(ctx, "no GPU driver source: "+r.GPUNote)
	} else {
		ctx = append(ctx, "no GPU driver source")
	}
	fmt.Fprintf(&b, "gpufeed check: %s\n", Clean(strings.Join(ctx, ", ")))
	s := r.Summary
	fmt.Fprintf(&b, "%d failed, %d warnings, %d errors, %d ok, %d absent, %d not visible\n",
		s.Fail, s.Warn, s.Error, s.OK, s.Absent, s.NotVisible)
	for _, st := range []finding.CheckStatus{finding.CheckFail, finding.CheckWarn, finding.CheckError} {
		for _, res := range r.Results {
			if res.Status == st {
				writeDetailed(&b, res)
			}
		}
	}
	for _, group := range []struct {
		st    finding.CheckStatus
		title string
	}{{finding.CheckOK, "ok"}, {finding.CheckAbsent, "absent"}, {finding.CheckNotVisible, "not visible"}} {
		first := true
		for _, res := range r.Results {
			if res.Status != group.st {
				continue
			}
			if first {
				fmt.Fprintf(&b, "\n%s:\n", group.title)
				first = false
			}
			line := res.Claim
			if res.Subject != "" {
				line = res.Subject + ": " + line
			}
			if res.Need != "" {
				line += " — needs " + res.Need
			}
			fmt.Fprintf(&b, "  %-18s %s\n", res.ID, Clean(line))
		}
	}
	if r.ExitStatus == CheckExitFailed {
		fmt.Fprintf(&b, "\nexit status %d: a check failed\n", CheckExitFailed)
	}
	fmt.Fprintf(&b, "\n%s\n", ExplainHint)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeDetailed(b *strings.Builder, r finding.CheckOutcome) {
	label := map[finding.CheckStatus]string{finding.CheckFail: "FAIL", finding.CheckWarn: "WARN", finding.CheckError: "ERROR"}[r.Status]
	head := r.ID
	if r.Subject != "" {
		head += "  " + r.Subject
	}
	fmt.Fprintf(b, "\n%-5s %s\n", label, Clean(head))
	fmt.Fprintf(b, "      %s\n", Clean(r.Claim))
	for _, ev := range r.Evidence {
		fmt.Fprintf(b, "      - %s\n", Clean(evidenceLine(ev)))
	}
	if r.Decision != "" {
		fmt.Fprintf(b, "      decision: %s\n", Clean(r.Decision))
	}
	if r.Need != "" {
		fmt.Fprintf(b, "      needs: %s\n", Clean(r.Need))
	}
}

func evidenceLine(ev finding.Evidence) string {
	val := ev.Text
	if val == "" {
		val = formatNumber(ev.Value)
		if ev.Unit != "" {
			val += " " + ev.Unit
		}
	}
	line := ev.What + ": " + val
	if ev.Window != "" {
		line += " (" + ev.Window + ")"
	}
	if ev.Source != "" {
		line += "  [" + ev.Source + "]"
	}
	return line
}

// formatNumber writes a value with the precision a reader needs: whole
// numbers as they are, others to three significant digits or so.
func formatNumber(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	a := math.Abs(v)
	var s string
	switch {
	case v == math.Trunc(v) || a >= 100:
		s = strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		s = strconv.FormatFloat(v, 'f', 1, 64)
	default:
		s = strconv.FormatFloat(v, 'f', 2, 64)
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// clean makes text from the machine safe for a terminal: control
// characters, line separators and bidirectional controls become '?', and
// text past safetext.MaxRunes (garbage quoted from a malformed file) is cut.
