// The HTML report (-o html): one self-contained file a browser opens
// offline. The verdict and its decision come first, then the timeline that
// proves it (what the verdict was judged from, interval by interval, with
// the intervals each cause took shaded), the findings with their evidence,
// and the tables folded.
//
// The charts are drawn by uPlot (MIT licence), embedded whole with its
// licence: the file loads nothing from anywhere. Every text from outside
// (process, thread, kernel and trace names, command lines, kernel lines)
// is cleaned by safetext and escaped by html/template for the context it
// lands in (text, attribute, or the JSON the charts read).

package render

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"math"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/safetext"
)

// FormatHTML is the HTML report.
const FormatHTML Format = "html"

// uPlotVersion is the embedded uPlot's version (htmlassets/README.md).
const uPlotVersion = "1.6.32"

var (
	//go:embed htmlassets/uPlot.iife.min.js
	uPlotJS string
	//go:embed htmlassets/uPlot.min.css
	uPlotCSS string
	//go:embed htmlassets/LICENSE.uPlot
	uPlotLicence string
	//go:embed htmlassets/report.js
	reportJS string
	//go:embed htmlassets/report.css
	reportCSS string
	//go:embed htmlassets/report.html.tmpl
	reportTmpl string
)

var htmlTemplate = template.Must(template.New("report").Parse(reportTmpl))

type htmlRenderer struct{}

// htmlPage is what the template reads. Every string in it is cleaned
// (safetext) when it is built; the template escapes it.
type htmlPage struct {
	Title    string
	Command  string
	Subtitle []string
	Verdict  *htmlVerdict
	// Verdicts are a multi-rank trace's, one per rank.
	Verdicts []htmlVerdict
	Charts   []htmlChart
	Findings []htmlFinding
	Tables   []htmlTable
	Notes    []string
	Footer   string
	// Data is what the charts read (JSON in the page).
	Data htmlData

	UPlotVersion string
	UPlotJS      template.JS
	UPlotCSS     template.CSS
	ReportJS     template.JS
	ReportCSS    template.CSS
	Licence      string
}

type htmlVerdict struct {
	Title      string
	Class      string
	Confidence string
	Summary    string
	Decision   string
	Missing    string
	Basis      string
}

type htmlFinding struct {
	ID, Severity, Subject, Claim, Decision string
	Verdict                                bool
	Evidence                               []string
}

type htmlTable struct {
	Title string
	Open  bool
	Head  []string
	Rows  [][]string
}

// htmlChart is one chart's place on the page; its data is in htmlData.
type htmlChart struct {
	ID, Title, Caption string
	Legend             []htmlLegend
}

// htmlLegend is a shaded cause's swatch; Color is one of this file's own
// constants (classColor, causeColor), never text from outside.
type htmlLegend struct {
	Label string
	Color template.CSS
}

type htmlData struct {
	Charts []chartData `json:"charts"`
}

// chartData is one chart: x values, series on scales, shaded bands.
type chartData struct {
	ID     string        `json:"id"`
	XLabel string        `json:"xlabel"`
	X      []float64     `json:"x"`
	Series []chartSeries `json:"series"`
	Bands  []chartBand   `json:"bands"`
	// Scales are the y scales: "pct" (0-100 %), "cores".
	Scales []chartScale `json:"scales"`
}

type chartScale struct {
	Key   string   `json:"key"`
	Label string   `json:"label"`
	Min   float64  `json:"min"`
	Max   *float64 `json:"max"`
	Right bool     `json:"right"`
}

type chartSeries struct {
	Label string     `json:"label"`
	Unit  string     `json:"unit"`
	Scale string     `json:"scale"`
	Color string     `json:"color"`
	Width float64    `json:"width"`
	Fill  string     `json:"fill,omitempty"`
	Y     []*float64 `json:"y"`
}

type chartBand struct {
	From  float64 `json:"from"`
	To    float64 `json:"to"`
	Label string  `json:"label"`
	Color string  `json:"color"`
}

// classColor shades the intervals each cause took.
var classColor = map[finding.Class]string{
	finding.SubmissionBound: "rgba(230,120,30,0.22)",
	finding.SyncBound:       "rgba(150,80,200,0.20)",
	finding.Preprocessing:   "rgba(40,160,90,0.20)",
	finding.StorageBound:    "rgba(140,100,60,0.25)",
	finding.TransferBound:   "rgba(30,140,200,0.20)",
	finding.TooLittleWork:   "rgba(120,120,120,0.20)",
	judge.SpinOrSubmit:      "rgba(230,190,30,0.25)",
	judge.Unexplained:       "rgba(200,60,60,0.12)",
}

func className(c finding.Class) string {
	if c == judge.Unexplained {
		return "unexplained"
	}
	return string(c)
}

func cleanAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = safetext.Clean(s)
	}
	return out
}

func newPage(command string, h Header) *htmlPage {
	return &htmlPage{Command: command, UPlotVersion: uPlotVersion, UPlotJS: template.JS(uPlotJS), UPlotCSS: template.CSS(uPlotCSS),
		ReportJS: template.JS(reportJS), ReportCSS: template.CSS(reportCSS), Licence: uPlotLicence,
		Footer: safetext.Clean(fmt.Sprintf("written by %s %s at %s", h.Tool, h.ToolVersion, h.GeneratedAt)),
		Data:   htmlData{Charts: []chartData{}}}
}

func (p *htmlPage) write(w io.Writer) error {
	return htmlTemplate.Execute(w, p)
}

func verdictView(title string, v *finding.Verdict) *htmlVerdict {
	return &htmlVerdict{Title: safetext.Clean(title), Class: string(v.Class), Confidence: fmt.Sprintf("%.0f%%", v.Confidence*100),
		Summary: safetext.Clean(v.Summary), Decision: safetext.Clean(v.Decision), Missing: safetext.Clean(v.Missing), Basis: safetext.Clean(v.Basis)}
}

func findingView(f finding.Finding, v *finding.Verdict) htmlFinding {
	hf := htmlFinding{ID: safetext.Clean(f.ID), Severity: f.Severity.String(), Subject: safetext.Clean(f.Subject), Claim: safetext.Clean(f.Claim)}
	if v != nil {
		for _, id := range v.Because {
			if id == f.ID {
				hf.Verdict = true
			}
		}
	}
	if f.Decision != "" && (v == nil || f.Decision != v.Decision) {
		hf.Decision = safetext.Clean(f.Decision)
	}
	for _, e := range f.Evidence {
		hf.Evidence = append(hf.Evidence, safetext.Clean(evidenceLine(e, "", true)))
	}
	return hf
}

// ptr is a chart value: nil (a gap in the line) where not measured.
func ptr(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	r := math.Round(v*100) / 100
	return &r
}

func pctScale() chartScale {
	m := 100.0
	return chartScale{Key: "pct", Label: "% of the interval", Min: 0, Max: &m}
}

// Diagnose writes a diagnose, demo or report document.
func (htmlRenderer) Diagnose(w io.Writer, r *Report, o Options) error {
	p := newPage(r.Header.Command, r.Header)
	p.Title = safetext.Clean("gpufeed " + r.Header.Command + ": " + targetText(r))
	p.Subtitle = []string{safetext.Clean(runSummary(r))}
	if r.Verdict != nil {
		p.Verdict = verdictView("Verdict", r.Verdict)
	}
	if r.Series != nil && len(r.Series.Intervals) > 0 {
		c, chart := liveChart(r.Series)
		p.Data.Charts = append(p.Data.Charts, c)
		p.Charts = append(p.Charts, chart)
	}
	for _, f := range r.Findings {
		p.Findings = append(p.Findings, findingView(f, r.Verdict))
	}
	p.Notes = cleanAll(r.Notes)
	p.Tables = diagnoseTables(r)
	return p.write(w)
}

// liveChart draws what the verdict was judged from: the GPU's busy share,
// the launch thread's running and run-queue shares, the job's other
// threads' CPU (in cores, on the right) and the host's iowait, with each
// run of intervals whose idle time went mostly to one cause shaded.
func liveChart(s *judge.Series) (chartData, htmlChart) {
	n := len(s.Intervals)
	x := make([]float64, n)
	t0 := s.Intervals[0].Start
	for i, iv := range s.Intervals {
		x[i] = math.Round(float64(iv.End-t0)/1e6) / 1e3
	}
	col := func(v []float64, k float64) []*float64 {
		out := make([]*float64, n)
		for i := range out {
			if i < len(v) {
				out[i] = ptr(v[i] * k)
			}
		}
		return out
	}
	launch := "launch thread"
	if s.Launch != "" {
		launch = "launch thread " + s.Launch
	}
	c := chartData{ID: "chart-timeline", XLabel: "seconds into the window", X: x, Bands: []chartBand{},
		Scales: []chartScale{pctScale()}}
	c.Series = []chartSeries{
		{Label: "GPU busy", Unit: "%", Scale: "pct", Color: "#2a7", Width: 2.5, Fill: "rgba(34,170,119,0.10)", Y: col(s.GPUUtil, 1)},
		{Label: launch + ": running", Unit: "%", Scale: "pct", Color: "#d62", Width: 1.5, Y: col(s.LaunchRun, 1)},
		{Label: launch + ": waiting for a CPU", Unit: "%", Scale: "pct", Color: "#c0c", Width: 1.5, Y: col(s.LaunchWait, 1)},
	}
	if s.Workers > 0 {
		// Their summed CPU can be many cores: on a scale of its own.
		c.Scales = append(c.Scales, chartScale{Key: "cores", Label: "cores", Right: true})
		c.Series = append(c.Series, chartSeries{Label: fmt.Sprintf("other threads of the job (%d): CPU", s.Workers), Unit: "cores",
			Scale: "cores", Color: "#36c", Width: 1.5, Y: col(s.WorkersCPU, 0.01)})
	}
	c.Series = append(c.Series, chartSeries{Label: "host iowait", Unit: "%", Scale: "pct", Color: "#865", Width: 1, Y: col(s.IOWait, 1)})
	for i := range c.Series {
		c.Series[i].Label = safetext.Clean(c.Series[i].Label)
	}
	seen := map[finding.Class]bool{}
	var legend []htmlLegend
	for i := 0; i < n; {
		if !s.Attributed[i] {
			i++
			continue
		}
		cls, j := s.Cause[i], i
		for j < n && s.Attributed[j] && s.Cause[j] == cls {
			j++
		}
		from := math.Round(float64(s.Intervals[i].Start-t0)/1e6) / 1e3
		c.Bands = append(c.Bands, chartBand{From: from, To: x[j-1], Label: className(cls), Color: classColor[cls]})
		if !seen[cls] {
			seen[cls] = true
			legend = append(legend, htmlLegend{Label: className(cls), Color: template.CSS(classColor[cls])})
		}
		i = j
	}
	chart := htmlChart{ID: c.ID, Title: "The timeline the verdict was judged from",
		Caption: fmt.Sprintf("%d intervals. Shaded: the intervals whose GPU idle time went mostly to each cause (the attribution the verdict sums).", n),
		Legend:  legend}
	return c, chart
}

func diagnoseTables(r *Report) []htmlTable {
	var out []htmlTable
	procs := htmlTable{Title: fmt.Sprintf("Processes (%d)", len(r.Processes)), Head: []string{"pid", "ppid", "role", "command", "threads", "CPU p50/p95/max %", "USS", "fds"}}
	threads := htmlTable{Title: "Threads", Head: []string{"pid", "tid", "name", "role", "CPU p50/p95/max %", "run-queue wait mean/p95 %", "state", "waiting in"}}
	nThreads := 0
	for _, pr := range r.Processes {
		procs.Rows = append(procs.Rows, cleanAll([]string{fmt.Sprint(pr.PID), fmt.Sprint(pr.PPID), dash(pr.Role), cmdOf(pr),
			fmt.Sprint(pr.ThreadCount), stat3(pr.CPUPercent), bytesOf(pr.USSBytes), fds(pr.FDs, pr.FDLimit)}))
		for _, th := range pr.Threads {
			nThreads++
			threads.Rows = append(threads.Rows, cleanAll([]string{fmt.Sprint(pr.PID), fmt.Sprint(th.TID), th.Comm, dash(th.Role),
				stat3(th.CPUPercent), pct(th.RunQueueWaitPercent) + " / " + pct(th.RunQueueWaitPercentP95), dash(th.State), dash(blocked(th))}))
		}
	}
	threads.Title = fmt.Sprintf("Threads (%d)", nThreads)
	out = append(out, procs, threads)
	if len(r.GPUs) > 0 {
		g := htmlTable{Title: fmt.Sprintf("GPUs (%d)", len(r.GPUs)), Head: []string{"index", "name", "util p10/p50/p90 %", "SM clock p50", "power p50", "PCIe TX/RX p50", "lost"}}
		for _, d := range r.GPUs {
			g.Rows = append(g.Rows, cleanAll([]string{fmt.Sprint(d.Index), d.Name, pct(d.UtilP10) + "/" + pct(d.UtilP50) + "/" + pct(d.UtilP90),
				mhz(d.SMClockP50), watts(d.PowerP50), rateBytes(d.PCIeTxP50) + " / " + rateBytes(d.PCIeRxP50), dash(d.Lost)}))
		}
		out = append(out, g)
	}
	if h := r.Host; h != nil {
		t := htmlTable{Title: "Host", Head: []string{"what", "value"}}
		t.Rows = append(t.Rows, []string{"CPUs", fmt.Sprint(h.NumCPU)}, []string{"busy p50/p95/max %", stat3(h.BusyPercent)},
			[]string{"iowait (mean)", pct(h.IOWaitPct)}, []string{"runnable tasks p50/p95/max", count3(h.RunQueue)},
			[]string{"memory available", bytesOf(h.MemAvailable)})
		for _, d := range h.Disks {
			t.Rows = append(t.Rows, cleanAll([]string{"disk " + d.Name, "reads " + rateBytes(d.ReadBytesPerSec) + ", util " + pct(d.UtilPercent)}))
		}
		out = append(out, t)
	}
	if len(r.Events) > 0 {
		t := htmlTable{Title: fmt.Sprintf("Events and kernel log lines (%d)", len(r.Events)), Head: []string{"at", "kind", "pid", "tid", "text"}}
		for _, e := range r.Events {
			t.Rows = append(t.Rows, cleanAll([]string{Duration(time.Duration(e.AtNS)), e.Kind, fmt.Sprint(e.PID), fmt.Sprint(e.TID), e.Text}))
		}
		out = append(out, t)
	}
	if len(r.NotVisible) > 0 {
		t := htmlTable{Title: fmt.Sprintf("Not visible (%d)", len(r.NotVisible)), Head: []string{"subject", "field", "why"}}
		for _, nv := range r.NotVisible {
			t.Rows = append(t.Rows, cleanAll([]string{nv.Subject, nv.Field, nv.Why}))
		}
		out = append(out, t)
	}
	return out
}

// Check writes gpufeed check's report: the failures and warnings on top,
// every outcome in a folded table.
func (htmlRenderer) Check(w io.Writer, r *CheckReport, o Options) error {
	p := newPage("check", r.Header)
	host := ""
	if r.Header.Hostname != nil {
		host = " on " + *r.Header.Hostname
	}
	p.Title = safetext.Clean("gpufeed check" + host)
	s := r.Summary
	p.Subtitle = []string{fmt.Sprintf("%d fail, %d warn, %d error, %d ok, %d absent, %d not visible", s.Fail, s.Warn, s.Error, s.OK, s.Absent, s.NotVisible)}
	if r.GPUSource != "" {
		p.Subtitle = append(p.Subtitle, safetext.Clean("GPU source: "+r.GPUSource))
	} else if r.GPUNote != "" {
		p.Subtitle = append(p.Subtitle, safetext.Clean(r.GPUNote))
	}
	for _, res := range r.Results {
		if res.Status == finding.CheckFail || res.Status == finding.CheckWarn {
			f := findingView(res.Finding(), nil)
			f.Severity = string(res.Status)
			p.Findings = append(p.Findings, f)
		}
	}
	all := htmlTable{Title: fmt.Sprintf("Every check (%d)", len(r.Results)), Open: len(p.Findings) == 0, Head: []string{"status", "id", "subject", "claim", "evidence", "to see it"}}
	for _, res := range r.Results {
		var ev []string
		for _, e := range res.Evidence {
			ev = append(ev, evidenceLine(e, "", true))
		}
		all.Rows = append(all.Rows, cleanAll([]string{string(res.Status), res.ID, res.Subject, res.Claim, strings.Join(ev, "; "), res.Need}))
	}
	p.Tables = []htmlTable{all}
	return p.write(w)
}

// traceBins is how many bins a trace's GPU timeline is drawn in: enough to
// see bursts, few enough for a file of any trace's length.
const traceBins = 600

// Trace writes a trace report: per rank its verdict, the GPU's busy share
// over the trace with each bin shaded by the cause most of its idle time
// had, the idle time by cause, and the findings.
func (htmlRenderer) Trace(w io.Writer, res *TraceReport, o Options) error {
	p := newPage("trace", res.Header)
	p.Title = "gpufeed trace"
	if len(res.Reports) == 1 {
		p.Title = safetext.Clean("gpufeed trace: " + res.Reports[0].Source)
	}
	for i, rep := range res.Reports {
		label := rep.Source
		if rep.Rank >= 0 {
			label = fmt.Sprintf("rank %d: %s", rep.Rank, rep.Source)
		}
		v := rep.Verdict
		if len(res.Reports) == 1 {
			p.Verdict = verdictView("Verdict", &v)
		} else {
			p.Verdicts = append(p.Verdicts, *verdictView(label, &v))
		}
		p.Subtitle = append(p.Subtitle, safetext.Clean(fmt.Sprintf("%s: %s, %s over %s, %s",
			label, rep.Format, safetext.Count(rep.Scope.GPUOps, "GPU operation", "GPU operations"), Duration(time.Duration(rep.Scope.EndNs-rep.Scope.StartNs)), safetext.Count(rep.Attribution.Gaps, "idle gap", "idle gaps"))))
		if c, chart, ok := traceChart(i, label, rep.Scope.StartNs, rep.Scope.EndNs, rep.Gaps); ok {
			p.Data.Charts = append(p.Data.Charts, c)
			p.Charts = append(p.Charts, chart)
		}
		byCause := htmlTable{Title: safetext.Clean("GPU idle time by cause: " + label), Open: true, Head: []string{"cause", "idle time", "share of idle"}}
		for _, cause := range causesOf() {
			if ns := rep.Attribution.ByCause[cause]; ns > 0 {
				byCause.Rows = append(byCause.Rows, []string{cause.String(), Duration(time.Duration(ns)), fmt.Sprintf("%.1f%%", sharePct(ns, rep.Attribution.IdleNs))})
			}
		}
		p.Tables = append(p.Tables, byCause)
		for _, f := range rep.Findings {
			hf := findingView(f, &v)
			if len(res.Reports) > 1 {
				hf.Subject = safetext.Clean(strings.TrimSpace(label + " " + hf.Subject))
			}
			p.Findings = append(p.Findings, hf)
		}
		for _, wn := range rep.Warnings {
			p.Notes = append(p.Notes, safetext.Clean(label+": "+wn))
		}
	}
	if len(res.Skipped) > 0 {
		t := htmlTable{Title: fmt.Sprintf("Files not read (%d)", len(res.Skipped)), Open: true, Head: []string{"file", "why"}}
		for _, s := range res.Skipped {
			t.Rows = append(t.Rows, cleanAll([]string{s.File, s.Reason}))
		}
		p.Tables = append(p.Tables, t)
	}
	return p.write(w)
}
