// The output of gpufeed check: its outcomes as text for people and JSON
// for programs.

package render

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

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
	// Header is set by the command that writes the report.
	Header    Header
	Root      string
	PID       int
	DataPath  string
	GPUSource string
	// GPUNote says why no GPU source was used, when none was.
	GPUNote string
	// Window is the time between the two readings of the counters that
	// advance (interrupts, PCIe replays).
	Window  time.Duration
	Summary CheckSummary
	// ExitStatus is CheckExitFailed when a check failed, else CheckExitOK.
	ExitStatus int
	Results    []finding.CheckOutcome
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
func NewCheckReport(results []finding.CheckOutcome) *CheckReport {
	r := &CheckReport{Results: results}
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

// checkDoc is the check report as JSON writes it.
type checkDoc struct {
	Header
	Root      *string       `json:"root"`
	PID       *int          `json:"pid"`
	DataPath  *string       `json:"data_path"`
	GPUSource *string       `json:"gpu_source"`
	GPUNote   string        `json:"gpu_note,omitempty"`
	WindowNS  int64         `json:"window_ns"`
	Summary   CheckSummary  `json:"summary"`
	Exit      int           `json:"exit_status"`
	Results   []checkResult `json:"results"`
}

// checkResult is one outcome. Check is the check's id (gpufeed explain
// documents it); ID is unique in the document: the check's id, followed by
// its subject when the check gave several outcomes.
type checkResult struct {
	ID       string              `json:"id"`
	Check    string              `json:"check"`
	Status   finding.CheckStatus `json:"status"`
	Severity finding.Severity    `json:"severity"`
	Subject  string              `json:"subject,omitempty"`
	Claim    string              `json:"claim"`
	Evidence []jsonEvidence      `json:"evidence"`
	Decision string              `json:"decision,omitempty"`
	Need     string              `json:"need,omitempty"`
	Supports finding.Class       `json:"supports,omitempty"`
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func checkJSON(r *CheckReport) checkDoc {
	d := checkDoc{Header: header(r.Header), Root: optString(r.Root), DataPath: optString(r.DataPath), GPUSource: optString(r.GPUSource),
		GPUNote: r.GPUNote, WindowNS: int64(r.Window), Summary: r.Summary, Exit: r.ExitStatus, Results: []checkResult{}}
	if r.PID > 0 {
		d.PID = &r.PID
	}
	n := map[string]int{}
	for _, res := range r.Results {
		n[res.ID]++
	}
	used := map[string]int{}
	for _, res := range r.Results {
		id := res.ID
		if n[id] > 1 {
			id += ":" + slug(res.Subject)
		}
		if used[id]++; used[id] > 1 {
			id += "-" + strconv.Itoa(used[id])
		}
		d.Results = append(d.Results, checkResult{ID: id, Check: res.ID, Status: res.Status, Severity: res.Severity,
			Subject: res.Subject, Claim: res.Claim, Evidence: evidenceJSON(res.Evidence), Decision: res.Decision,
			Need: res.Need, Supports: res.Supports})
	}
	return d
}

// slug makes a subject an id part: lower case, runs of anything but
// letters, digits, '.' and ':' become one '-'.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '.' || r == ':' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(r)
			dash = false
			continue
		}
		dash = true
	}
	if b.Len() == 0 {
		return "result"
	}
	return b.String()
}

// Check writes the check report. By default: the context, the counts,
// failures, warnings and errors one line each, and one line folding what
// passed, was absent or not visible. Quiet: the failures only. Verbose:
// every outcome, failures with their evidence and decision.
func (textRenderer) Check(w io.Writer, r *CheckReport, o Options) error {
	t := &textOut{}
	width := o.width()
	if o.Quiet {
		// A node gate's only output: each failure whole, wrapped.
		t.wrapAt = width
		for _, res := range r.Results {
			if res.Status == finding.CheckFail {
				t.line("%s", checkLine(res))
			}
		}
		return t.flush(w)
	}
	if o.Verbose {
		t.wrapAt = width
	}
	t.line("%s", clip("gpufeed check: "+checkContext(r), width))
	s := r.Summary
	if o.Verbose {
		t.line("%d failed, %s, %s, %d ok, %d absent, %d not visible", s.Fail, safetext.Count(s.Warn, "warning", "warnings"), safetext.Count(s.Error, "error", "errors"), s.OK, s.Absent, s.NotVisible)
		for _, st := range []finding.CheckStatus{finding.CheckFail, finding.CheckWarn, finding.CheckError} {
			for _, res := range r.Results {
				if res.Status == st {
					checkDetail(t, res)
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
					t.line("")
					t.line("%s:", group.title)
					first = false
				}
				line := res.Claim
				if res.Subject != "" {
					line = res.Subject + ": " + line
				}
				if res.Need != "" {
					line += " — needs " + res.Need
				}
				t.line("  %-18s %s", res.ID, line)
			}
		}
	} else {
		for _, st := range []finding.CheckStatus{finding.CheckFail, finding.CheckWarn, finding.CheckError} {
			for _, res := range r.Results {
				if res.Status == st {
					t.line("%s", clip(checkLine(res), width))
				}
			}
		}
		t.line("%s", clip(fmt.Sprintf("%d failed, %s, %s; %d ok, %d absent or not applicable, %d not visible (-v lists them)",
			s.Fail, safetext.Count(s.Warn, "warning", "warnings"), safetext.Count(s.Error, "error", "errors"), s.OK, s.Absent, s.NotVisible), width))
	}
	if r.ExitStatus == CheckExitFailed {
		if o.Verbose {
			t.line("")
		}
		t.line("exit status %d: a check failed", CheckExitFailed)
	}
	if o.Verbose {
		t.line("")
	}
	t.line("%s", ExplainHint)
	return t.flush(w)
}

func checkContext(r *CheckReport) string {
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
	switch {
	case r.GPUSource != "":
		ctx = append(ctx, "GPU source "+r.GPUSource)
	case r.GPUNote != "":
		ctx = append(ctx, "no GPU driver source: "+r.GPUNote)
	default:
		ctx = append(ctx, "no GPU driver source")
	}
	return strings.Join(ctx, ", ")
}

var checkLabel = map[finding.CheckStatus]string{finding.CheckFail: "FAIL", finding.CheckWarn: "WARN", finding.CheckError: "ERROR"}

// checkLine is an outcome on one line: status, id, subject, claim.
func checkLine(r finding.CheckOutcome) string {
	head := r.ID
	if r.Subject != "" {
		head += " [" + r.Subject + "]"
	}
	return fmt.Sprintf("%-5s %s: %s", checkLabel[r.Status], head, r.Claim)
}

func checkDetail(t *textOut, r finding.CheckOutcome) {
	head := r.ID
	if r.Subject != "" {
		head += "  " + r.Subject
	}
	t.line("")
	t.line("%-5s %s", checkLabel[r.Status], head)
	t.line("      %s", r.Claim)
	for _, ev := range r.Evidence {
		t.line("      - %s", evidenceLine(ev, "", true))
	}
	if r.Decision != "" {
		t.line("      decision: %s", r.Decision)
	}
	if r.Need != "" {
		t.line("      needs: %s", r.Need)
	}
}
