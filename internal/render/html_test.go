package render

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Names that try to run script or break out of an attribute or the page's
// JSON: a process may call itself anything, and a kernel line quotes it.
const (
	evilComm   = `<script>alert("comm")</script>'"&`
	evilArg    = `"><img src=x onerror=alert(1)>`
	evilKernel = `</script><script>alert('kernel')</script>`
	evilTrace  = `</script><svg onload=alert('trace')>.json`
)

func htmlOf(t *testing.T, doc Document) string {
	t.Helper()
	var b bytes.Buffer
	if err := Write(&b, FormatHTML, doc, Options{}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// chartJSON is the page's chart data, as the page's script reads it.
func chartJSON(t *testing.T, page string) htmlData {
	t.Helper()
	const open = `<script type="application/json" id="gpufeed-data">`
	i := strings.Index(page, open)
	if i < 0 {
		t.Fatal("no chart data in the page")
	}
	rest := page[i+len(open):]
	j := strings.Index(rest, "</script>")
	var d htmlData
	if err := json.Unmarshal([]byte(rest[:j]), &d); err != nil {
		t.Fatalf("chart data: %v", err)
	}
	return d
}

// htmlElements are the elements the page's own template writes.
var htmlElements = map[string]bool{"html": true, "head": true, "meta": true, "title": true, "style": true, "body": true,
	"header": true, "h1": true, "h2": true, "p": true, "div": true, "section": true, "span": true, "i": true, "noscript": true,
	"ul": true, "li": true, "details": true, "summary": true, "table": true, "thead": true, "tbody": true, "tr": true,
	"th": true, "td": true, "footer": true, "pre": true, "script": true}

// assertInert parses the page as a browser does and checks that it holds
// only the template's own elements, exactly its own three scripts (the
// data, uPlot, the report's), no event-handler attribute, nothing loaded
// from anywhere (no src, href or link), and uPlot's licence.
func assertInert(t *testing.T, page string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	scripts := 0
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			if !htmlElements[n.Data] {
				t.Errorf("element <%s> is not the template's", n.Data)
			}
			if n.Data == "script" {
				scripts++
			}
			for _, a := range n.Attr {
				if strings.HasPrefix(a.Key, "on") || a.Key == "src" || a.Key == "href" {
					t.Errorf("<%s %s=%q>", n.Data, a.Key, a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if scripts != 3 {
		t.Errorf("%d <script> elements, want the page's own 3", scripts)
	}
	if !strings.Contains(page, "Permission is hereby granted") || !strings.Contains(page, "Copyright (c) 2022 Leon Sorokin") {
		t.Error("uPlot's licence is not in the page")
	}
}

// A report whose process, thread, command line and kernel log line are
// hostile: each shows as text, escaped, in the page and in its chart data,
// and nothing of them runs.
func TestHTMLEscapesNamesFromOutside(t *testing.T) {
	tl, _ := loadRecording(t, "demo-submission-bound.gpufeed")
	target := tl.Meta.Target.PID
	for k, p := range tl.Procs {
		if k.PID == target {
			p.Comm, p.Cmdline = evilComm, []string{"python3", evilArg}
		}
	}
	for _, th := range tl.Threads {
		if th.PID == target {
			th.Comm = evilComm
		}
	}
	tl.Events = append(tl.Events, timeline.Event{T: 1e9, Kind: timeline.EventKernelLog, PID: target, Text: evilKernel})
	v := derive.New(tl)
	rep := Build(tl, v, judge.Judge(tl, v), nil)
	series := rep.Series
	rep.Header = NewHeader("report", "test", "host")
	page := htmlOf(t, rep)
	assertInert(t, page)
	for _, want := range []string{
		`&lt;script&gt;alert(&#34;comm&#34;)&lt;/script&gt;&#39;&#34;&amp;`,   // the name, in the title and tables
		`&#34;&gt;&lt;img src=x onerror=alert(1)&gt;`,                         // the command line
		`&lt;/script&gt;&lt;script&gt;alert(&#39;kernel&#39;)&lt;/script&gt;`, // the kernel line
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks the escaped text %s", want)
		}
	}
	d := chartJSON(t, page)
	if len(d.Charts) != 1 || len(d.Charts[0].X) != len(series.Intervals) {
		t.Fatalf("charts %+v: want one of %d points", d.Charts, len(series.Intervals))
	}
	if l := d.Charts[0].Series[1].Label; !strings.Contains(l, evilComm) {
		t.Errorf("the launch thread's name in the chart data is %q, want it whole (the JSON escapes it)", l)
	}
}

// The timeline holds every interval of the window, and the shaded bands
// are exactly the runs of intervals the attribution gave one cause.
func TestHTMLTimelineIsTheJudgedSeries(t *testing.T) {
	for _, name := range []string{"demo-submission-bound.gpufeed", "demo-preprocessing-bound.gpufeed", "demo-storage-bound.gpufeed"} {
		t.Run(name, func(t *testing.T) {
			tl, _ := loadRecording(t, name)
			v := derive.New(tl)
			rep := Build(tl, v, judge.Judge(tl, v), nil)
			series, verdict := rep.Series, rep.Verdict
			page := htmlOf(t, rep)
			assertInert(t, page)
			if !strings.Contains(page, `id="verdict-class">`+string(verdict.Class)+`<`) {
				t.Errorf("verdict %s not on top", verdict.Class)
			}
			c := chartJSON(t, page).Charts[0]
			if len(c.X) != len(v.Intervals) {
				t.Errorf("%d points, want %d intervals", len(c.X), len(v.Intervals))
			}
			for _, s := range c.Series {
				if len(s.Y) != len(c.X) {
					t.Errorf("series %s: %d values for %d points", s.Label, len(s.Y), len(c.X))
				}
			}
			// Rebuild the runs from the attribution and compare.
			var runs []string
			for i := 0; i < len(series.Cause); {
				if !series.Attributed[i] {
					i++
					continue
				}
				j := i
				for j < len(series.Cause) && series.Attributed[j] && series.Cause[j] == series.Cause[i] {
					j++
				}
				runs = append(runs, className(series.Cause[i]))
				i = j
			}
			var got []string
			for _, b := range c.Bands {
				got = append(got, b.Label)
				if b.To < b.From {
					t.Errorf("band %+v ends before it starts", b)
				}
			}
			if strings.Join(got, ",") != strings.Join(runs, ",") {
				t.Errorf("bands %v, want the attribution's runs %v", got, runs)
			}
		})
	}
}

// A trace whose file name is hostile: escaped; its GPU timeline has every
// bin, and the idle it draws adds up to the gaps' idle time.
func TestHTMLTrace(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "traces", "critical_path", "cuda_event_sync_multi_stream", "event_sync_trace.json.gz")
	tr, err := kineto.DecodeFile(path, kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep := tracejudge.Analyze(tr, tracejudge.Options{KeepGaps: true})
	rep.Source = evilTrace
	page := htmlOf(t, &TraceReport{Reports: []*tracejudge.RankReport{rep}})
	assertInert(t, page)
	if !strings.Contains(page, `&lt;/script&gt;&lt;svg onload=alert(&#39;trace&#39;)&gt;.json`) {
		t.Error("the trace's name is not escaped in the page")
	}
	c := chartJSON(t, page).Charts[0]
	if len(c.X) != len(c.Series[0].Y) || len(c.X) == 0 {
		t.Fatalf("%d points, %d busy values", len(c.X), len(c.Series[0].Y))
	}
	// Idle drawn (share of each bin) times the bin width is the gaps'
	// idle time inside the scope, within rounding.
	width := float64(rep.Scope.EndNs-rep.Scope.StartNs) / float64(len(c.X))
	drawn := 0.0
	for _, y := range c.Series[1].Y {
		if y != nil {
			drawn += *y / 100 * width
		}
	}
	var gaps float64
	for _, g := range rep.Gaps {
		s, e := max(g.StartNs, rep.Scope.StartNs), min(g.StartNs+g.DurNs, rep.Scope.EndNs)
		if e > s {
			gaps += float64(e - s)
		}
	}
	devices := map[int32]bool{}
	for _, g := range rep.Gaps {
		devices[g.Device] = true
	}
	gaps /= float64(len(devices))
	if gaps == 0 || drawn < gaps*0.98 || drawn > gaps*1.02 {
		t.Errorf("idle drawn %.0f ns, gaps hold %.0f ns", drawn, gaps)
	}
	if len(c.Bands) == 0 {
		t.Error("no idle bin shaded by its cause")
	}
}

// Check's page: the failures and warnings as findings, every outcome in
// the table, the hostile names escaped.
func TestHTMLCheck(t *testing.T) {
	rep := NewCheckReport([]finding.CheckOutcome{
		{ID: "shm-size", Status: finding.CheckWarn, Severity: finding.Warning, Subject: evilComm, Claim: "small /dev/shm " + evilArg,
			Evidence: []finding.Evidence{{What: "size", Value: 64, Unit: "MiB", Source: evilKernel}}},
		{ID: "cpu-governor", Status: finding.CheckOK, Claim: "performance"},
	})
	page := htmlOf(t, rep)
	assertInert(t, page)
	if strings.Contains(page, evilComm) || !strings.Contains(page, "&lt;script&gt;") {
		t.Error("check page: subject not escaped")
	}
	if strings.Count(page, `class="finding sev-warn"`) != 1 || !strings.Contains(page, "cpu-governor") {
		t.Error("check page: want the warning as a finding and every check in the table")
	}
}
