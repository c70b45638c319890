// Package compare sets node reports side by side and runs of one job before
// and after a change (gpufeed compare): what differs between the nodes'
// platform checks, which node is the straggler, which member died first and
// where across the nodes' kernel logs, and what moved between two runs, by
// how much, against the noise measured within each run.
//
// It reads what gpufeed itself wrote: `gpufeed check -o json` documents,
// `gpufeed diagnose|report|demo -o json` documents (the contract of the
// JSON documentation) and recordings (--record). It decides; internal/render
// writes the result.
package compare

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/safetext"
	"github.com/gpufeed/gpufeed/internal/timeline"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// Kind is what an input file holds.
type Kind string

// The kinds of input.
const (
	// KindCheck is a `gpufeed check -o json` document: one node's platform.
	KindCheck Kind = "check"
	// KindReport is a diagnose, report, demo or agent JSON document: one
	// run, with the percentiles the document keeps.
	KindReport Kind = "report"
	// KindRecording is a recording (--record): one run, every interval.
	KindRecording Kind = "recording"
)

// Input is one file given to compare.
type Input struct {
	// File is the name the file was given by.
	File string `json:"file"`
	// Label names the input in the comparison: its host when the host names
	// each input once, else the file's base name (set by Compare).
	Label string `json:"label"`
	Kind  Kind   `json:"kind"`
	// Host is the host the document describes; "" when it does not say.
	Host string `json:"host"`

	Check *CheckDoc `json:"-"`
	Run   *Run      `json:"-"`
	// Warnings are what the reader could not use (a truncated recording).
	Warnings []string `json:"-"`
}

// CheckDoc is what compare reads of a check document.
type CheckDoc struct {
	PID     *int
	Results []CheckResult
}

// CheckResult is one platform check's result on one node.
type CheckResult struct {
	ID, Check, Status, Severity, Subject, Claim, Decision string
}

// Run is one observed run of a job: its verdict and the quantities compare
// sets side by side.
type Run struct {
	// Started is the wall clock at the first sample; Resolution how finely
	// the input gives it (a JSON report writes whole seconds).
	Started    time.Time
	Resolution time.Duration
	Duration   time.Duration
	Intervals  int
	// Target names the observed job: its root's pid and command name.
	PID  int
	Comm string
	// Verdict is the verdict's class ("" when no rules ran); Findings the
	// finding ids, the verdict's first.
	Verdict    string
	Confidence int
	Findings   []string
	Metrics    []*Metric
	Deaths     []Death
	// PerInterval says the metrics carry every interval's value (a
	// recording); a JSON report keeps percentiles only.
	PerInterval bool
}

// Metric is one quantity of a run, over the window's intervals.
type Metric struct {
	Key  string `json:"key"`
	Name string `json:"name"`
	Unit string `json:"unit"`
	// Better is +1 when more is better (GPU busy), -1 when less is (time
	// waiting for a CPU), 0 when neither.
	Better int `json:"-"`
	// P10, P50, P90 and Mean of the per-interval values; NaN when the input
	// does not hold it.
	P10, P50, P90, Mean float64
	// N is the number of intervals measured.
	N int
	// Of names whose quantity it is ("python3 (tid 4242)").
	Of string
}

// Death is one member of a job that died, as a kernel log told it.
type Death struct {
	// Label is the input (the node) whose kernel log told it.
	Label string
	At    time.Time
	// Resolution is how finely At is known.
	Resolution time.Duration
	PID        int
	Comm       string
	// Member names it in its job ("rank 2", "local rank 1"): its RANK (or
	// SLURM_PROCID), or the rank told by elimination; "" when not known.
	Member string
	// Cause is the kernel log's kind: oom-kill, segfault, trap.
	Cause string
	// Where says where it died: the mapped object of a fault, the memory
	// cgroup of an OOM kill.
	Where string
	// Line is the kernel's line, capped (text from outside).
	Line string
}

const maxDocBytes = 256 << 20

// Load reads one input: a recording (a gzip stream) or a JSON document of
// gpufeed check, diagnose, report, demo or the agent's /report.
func Load(name string, r io.Reader) (*Input, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, _ := br.Peek(2)
	if prefix, _ := br.Peek(len(sqliteMagic)); string(prefix) == sqliteMagic {
		return nil, notATrace(name, "an SQLite database (a profiler trace exported by Nsight Systems?)")
	}
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		if p := gunzipPrefix(br); !bytes.HasPrefix(p, []byte(`{"format":"gpufeed-timeline"`)) && isTraceJSON(p) {
			return nil, notATrace(name, "a profiler trace (Chrome-trace JSON, gzip)")
		}
		tl, warnings, err := timeline.Decode(br, name)
		if err != nil {
			return nil, err
		}
		in := FromTimeline(name, tl)
		in.Warnings = warnings
		return in, nil
	}
	// Sniffed and capped before anything is read, as the trace and
	// recording readers do: a document gpufeed wrote starts with '{', and a
	// regular file's size is known; a 2 GB file of zeros is refused at once.
	head, _ := br.Peek(16)
	if t := bytes.TrimLeft(head, trace.JSONStart); len(t) > 0 && t[0] != '{' {
		return nil, fmt.Errorf("%s: not a gpufeed document: expected gpufeed's JSON output (-o json) or a recording; %s", name, trace.LooksLike(head))
	}
	if size, ok := regularSize(r); ok && size > maxDocBytes {
		return nil, fmt.Errorf("%s: %d MiB, larger than the %d MiB a gpufeed document can be: not a gpufeed document", name, size>>20, maxDocBytes>>20)
	}
	b, err := io.ReadAll(io.LimitReader(br, maxDocBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(b) > maxDocBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB: not a gpufeed document", name, maxDocBytes>>20)
	}
	return parseDocument(name, b)
}

const sqliteMagic = "SQLite format 3\x00"

// regularSize is r's size when r is a regular file.
func regularSize(r io.Reader) (int64, bool) {
	f, ok := r.(interface{ Stat() (fs.FileInfo, error) })
	if !ok {
		return 0, false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0, false
	}
	return st.Size(), true
}

// notATrace is the error for a profiler trace given to compare.
func notATrace(name, what string) error {
	return fmt.Errorf("%s: %s, not a gpufeed document or recording: compare reads what gpufeed check, diagnose, report and demo write; "+
		"gpufeed trace FILE|DIR reads traces (and compares the ranks of a directory)", name, what)
}

// gunzipPrefix is the first KiB of the stream a gzip file starts, read
// from what br has buffered without consuming it ("" when it does not
// decode).
func gunzipPrefix(br *bufio.Reader) []byte {
	buf, _ := br.Peek(br.Size())
	zr, err := gzip.NewReader(bytes.NewReader(buf))
	if err != nil {
		return nil
	}
	out, _ := io.ReadAll(io.LimitReader(zr, 1<<10))
	return out
}

// isTraceJSON says whether b (a whole file or its first KiB) starts like
// a Chrome trace: an object whose first keys are a profiler's
// (traceEvents, schemaVersion, deviceProperties...) or an array of events.
func isTraceJSON(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) > 0 && b[0] == '[' {
		return bytes.Contains(b[:min(len(b), 1<<10)], []byte(`"ph"`))
	}
	head := b[:min(len(b), 1<<10)]
	for _, key := range []string{`"traceEvents"`, `"schemaVersion"`, `"deviceProperties"`, `"displayTimeUnit"`} {
		if bytes.Contains(head, []byte(key)) {
			return true
		}
	}
	return false
}

// header is the part of every gpufeed JSON document that says what it is.
type header struct {
	SchemaVersion *int    `json:"schema_version"`
	Command       string  `json:"command"`
	Tool          string  `json:"tool"`
	Hostname      *string `json:"hostname"`
}

// SchemaVersion is the JSON contract's version compare reads.
const SchemaVersion = 2

func parseDocument(name string, b []byte) (*Input, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fmt.Errorf("%s: empty file: expected a gpufeed JSON document or recording", name)
	}
	var h header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("%s: %s: expected a gpufeed JSON document (gpufeed check/diagnose/report -o json) or a recording", name, jsonErr(b, err))
	}
	if h.Tool != "gpufeed" && isTraceJSON(b) {
		return nil, notATrace(name, "a profiler trace (Chrome-trace JSON)")
	}
	if h.Tool != "gpufeed" || h.SchemaVersion == nil {
		return nil, fmt.Errorf("%s: a JSON document, but not one gpufeed wrote (no \"tool\": \"gpufeed\" and \"schema_version\")", name)
	}
	if *h.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("%s: schema version %d; this gpufeed reads version %d", name, *h.SchemaVersion, SchemaVersion)
	}
	in := &Input{File: name}
	if h.Hostname != nil {
		in.Host = *h.Hostname
	}
	switch h.Command {
	case "check":
		in.Kind = KindCheck
		doc, err := parseCheck(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", name, jsonErr(b, err))
		}
		in.Check = doc
	case "diagnose", "report", "demo", "agent":
		in.Kind = KindReport
		run, warnings, err := parseReport(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %s", name, jsonErr(b, err))
		}
		in.Run, in.Warnings = run, warnings
	case "trace":
		return nil, fmt.Errorf("%s: a trace report: compare reads check and diagnose/report documents and recordings (gpufeed trace compares the ranks of one trace directory itself)", name)
	default:
		return nil, fmt.Errorf("%s: command %q: expected a check, diagnose, report, demo or agent document", name, safetext.Cap(h.Command, 40))
	}
	return in, nil
}

// jsonErr says where in b a decoding error is: line and column.
func jsonErr(b []byte, err error) string {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
		if te.Field != "" {
			err = fmt.Errorf("field %s: expected %s, found %s", te.Field, te.Type, te.Value)
		}
	}
	if off < 0 || off > int64(len(b)) {
		return err.Error()
	}
	if se != nil && off > 0 {
		off-- // the offending byte is the last one read
	}
	line := 1 + bytes.Count(b[:off], []byte{'\n'})
	col := off - int64(bytes.LastIndexByte(b[:off], '\n'))
	return fmt.Sprintf("line %d, column %d: %v", line, col, err)
}

type checkJSON struct {
	PID     *int `json:"pid"`
	Results []struct {
		ID       string `json:"id"`
		Check    string `json:"check"`
		Status   string `json:"status"`
		Severity string `json:"severity"`
		Subject  string `json:"subject"`
		Claim    string `json:"claim"`
		Decision string `json:"decision"`
	} `json:"results"`
}

func parseCheck(b []byte) (*CheckDoc, error) {
	var c checkJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, err
	}
	if c.Results == nil {
		return nil, errors.New("no \"results\": not a complete check document")
	}
	doc := &CheckDoc{PID: c.PID}
	seen := map[string]bool{}
	for i, r := range c.Results {
		if r.ID == "" || r.Status == "" {
			return nil, fmt.Errorf("results[%d]: no id or status", i)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("results[%d]: id %q repeated", i, safetext.Cap(r.ID, 60))
		}
		seen[r.ID] = true
		doc.Results = append(doc.Results, CheckResult{ID: r.ID, Check: r.Check, Status: r.Status, Severity: r.Severity,
			Subject: r.Subject, Claim: r.Claim, Decision: r.Decision})
	}
	return doc, nil
}

// stat is the contract's per-interval statistic.
type stat struct {
	P50     *float64 `json:"p50"`
	P95     *float64 `json:"p95"`
	Samples int      `json:"samples"`
}

type reportJSON struct {
	Verdict *struct {
		Class      string `json:"class"`
		Confidence int    `json:"confidence_percent"`
	} `json:"verdict"`
	Findings []struct {
		ID string `json:"id"`
	} `json:"findings"`
	// Job and Deaths are the judge's own (judge.Judgement), carried as it
	// wrote them: compare reads the launch thread and the members that
	// died from them, never from the findings' text.
	Job    *judge.JobJudged `json:"job"`
	Deaths []judge.Death    `json:"deaths"`
	Target struct {
		PID  int    `json:"pid"`
		Comm string `json:"comm"`
	} `json:"target"`
	Window struct {
		Started    string `json:"started"`
		DurationNS int64  `json:"duration_ns"`
		Samples    int    `json:"samples"`
	} `json:"window"`
	Processes []struct {
		PID    int    `json:"pid"`
		Comm   string `json:"comm"`
		Role   string `json:"role"`
		Rank   string `json:"rank"`
		CPU    stat   `json:"cpu_percent"`
		Exited bool   `json:"exited"`
		// COWCopied is a forked worker's private copies of its parent's
		// memory at the end of the window.
		COWCopied *float64 `json:"cow_copied_bytes"`
		Threads   []struct {
			TID     int      `json:"tid"`
			Comm    string   `json:"comm"`
			Role    string   `json:"role"`
			CPU     stat     `json:"cpu_percent"`
			Wait    *float64 `json:"runqueue_wait_percent"`
			WaitP95 *float64 `json:"runqueue_wait_p95_percent"`
		} `json:"threads"`
	} `json:"processes"`
	Host *struct {
		Busy stat `json:"busy_percent"`
	} `json:"host"`
	GPUs []struct {
		Index   int      `json:"index"`
		P10     *float64 `json:"util_p10_percent"`
		P50     *float64 `json:"util_p50_percent"`
		P90     *float64 `json:"util_p90_percent"`
		Mean    *float64 `json:"util_mean_percent"`
		Samples int      `json:"util_samples"`
	} `json:"gpus"`
}

func val(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

func parseReport(b []byte) (*Run, []string, error) {
	var r reportJSON
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, nil, err
	}
	var warnings []string
	run := &Run{PID: r.Target.PID, Comm: r.Target.Comm, Duration: time.Duration(r.Window.DurationNS),
		Intervals: max(0, r.Window.Samples-1)}
	if r.Window.Started != "" {
		t, err := time.Parse(time.RFC3339Nano, r.Window.Started)
		if err != nil {
			return nil, nil, fmt.Errorf("window.started %q: expected an RFC 3339 time", safetext.Cap(r.Window.Started, 40))
		}
		run.Started, run.Resolution = t, resolution(r.Window.Started, t)
	}
	if r.Verdict != nil {
		run.Verdict, run.Confidence = r.Verdict.Class, r.Verdict.Confidence
	}
	for _, f := range r.Findings {
		run.Findings = append(run.Findings, f.ID)
	}
	// GPU busy: the devices' utilisation, with the spread the document
	// keeps (p10 and p90 of the per-interval values). With several GPUs,
	// the mean of each statistic over the devices (the job's view of them).
	if n := len(r.GPUs); n > 0 {
		m := &Metric{Key: "gpu_busy", Name: "GPU busy", Unit: "%", Better: +1, Of: gpuOf(n)}
		var p10, p50, p90, mean float64
		for _, g := range r.GPUs {
			p10, p50, p90, mean = p10+val(g.P10), p50+val(g.P50), p90+val(g.P90), mean+val(g.Mean)
			if m.N == 0 || g.Samples < m.N {
				m.N = g.Samples
			}
		}
		k := float64(n)
		m.P10, m.P50, m.P90, m.Mean = p10/k, p50/k, p90/k, mean/k
		if m.N > 0 && !math.IsNaN(m.P50) {
			run.Metrics = append(run.Metrics, m)
		}
	}
	// The launch thread is the judge's (the document's job.launch_thread),
	// its figures the thread's own row.
	var launch *judge.ThreadRef
	if r.Job != nil {
		launch = r.Job.LaunchThread
	} else if r.Verdict != nil {
		warnings = append(warnings, "written by a gpufeed that did not record the job as judged (no \"job\"): its launch thread and the members that died are not compared")
	}
	var job *Metric
	for _, p := range r.Processes {
		if p.PID == r.Target.PID && p.CPU.P50 != nil {
			job = &Metric{Key: "job_cpu", Name: "job's root process CPU", Unit: "% of a core", P10: math.NaN(), P50: *p.CPU.P50,
				P90: math.NaN(), Mean: math.NaN(), N: p.CPU.Samples, Of: fmt.Sprintf("%s (pid %d)", p.Comm, p.PID)}
		}
		if launch == nil || p.PID != launch.PID {
			continue
		}
		for _, t := range p.Threads {
			if t.TID != launch.TID || t.CPU.P50 == nil {
				continue
			}
			of := fmt.Sprintf("%s (tid %d)", t.Comm, t.TID)
			run.Metrics = append(run.Metrics, &Metric{Key: "launch_cpu", Name: "launch thread on a CPU", Unit: "% of a core",
				P10: math.NaN(), P50: *t.CPU.P50, P90: math.NaN(), Mean: math.NaN(), N: t.CPU.Samples, Of: of})
			if t.Wait != nil {
				run.Metrics = append(run.Metrics, &Metric{Key: "launch_wait", Name: "launch thread waiting for a CPU", Unit: "%", Better: -1,
					P10: math.NaN(), P50: math.NaN(), P90: math.NaN(), Mean: *t.Wait, N: t.CPU.Samples, Of: of})
			}
		}
	}
	if job != nil {
		run.Metrics = append(run.Metrics, job)
	}
	copied, forked := 0.0, 0
	for _, p := range r.Processes {
		if p.COWCopied != nil && !p.Exited {
			copied += *p.COWCopied
			forked++
		}
	}
	if forked > 0 {
		run.Metrics = append(run.Metrics, cowMetric(copied, forked, max(0, r.Window.Samples-1)))
	}
	if r.Host != nil && r.Host.Busy.P50 != nil {
		run.Metrics = append(run.Metrics, &Metric{Key: "host_busy", Name: "host CPUs busy", Unit: "%", P10: math.NaN(),
			P50: *r.Host.Busy.P50, P90: math.NaN(), Mean: math.NaN(), N: r.Host.Busy.Samples, Of: "all CPUs"})
	}
	run.Deaths = deathsOf(r.Deaths)
	return run, warnings, nil
}

// resolution is how finely an RFC 3339 text gives its time: whole seconds
// unless it has a fraction.
func resolution(s string, t time.Time) time.Duration {
	if i := bytes.IndexByte([]byte(s), '.'); i >= 0 {
		digits := 0
		for _, c := range s[i+1:] {
			if c < '0' || c > '9' {
				break
			}
			digits++
		}
		d := time.Second
		for ; digits > 0 && d > time.Nanosecond; digits-- {
			d /= 10
		}
		return d
	}
	_ = t
	return time.Second
}

func gpuOf(n int) string {
	if n == 1 {
		return "the job's GPU"
	}
	return fmt.Sprintf("mean of the job's %d GPUs", n)
}

// FromTimeline judges a recording as gpufeed report does and keeps every
// interval's value of the quantities compare sets side by side.
func FromTimeline(name string, tl *timeline.Timeline) *Input {
	v := derive.New(tl)
	jd := judge.Judge(tl, v)
	verdict, findings, in := jd.Verdict, jd.Findings, jd.Input
	run := &Run{Started: tl.Meta.Started, Resolution: time.Microsecond, Intervals: len(v.Intervals),
		PID: tl.Meta.Target.PID, PerInterval: true}
	if p := v.Target(); p != nil && p.Info != nil {
		run.Comm = p.Info.Comm
	}
	if len(tl.Ticks) > 1 {
		run.Duration = time.Duration(tl.Ticks[len(tl.Ticks)-1].T - tl.Ticks[0].T)
	}
	if verdict != nil {
		run.Verdict, run.Confidence = string(verdict.Class), int(math.Round(verdict.Confidence*100))
	}
	for _, f := range findings {
		run.Findings = append(run.Findings, f.ID)
	}
	add := func(key, name, unit string, better int, of string, s derive.Series) {
		st := s.Stats()
		if st.N == 0 {
			return
		}
		run.Metrics = append(run.Metrics, &Metric{Key: key, Name: name, Unit: unit, Better: better,
			P10: st.P10, P50: st.P50, P90: st.P90, Mean: st.Mean, N: st.N, Of: of})
	}
	// The series the verdict was judged from, and the judge's launch thread.
	if len(in.Job.Devices) > 0 {
		add("gpu_busy", "GPU busy", "%", +1, gpuOf(len(in.Job.Devices)), jd.Series.GPUUtil)
	}
	if l := jd.Job.LaunchThread; l != nil {
		of := fmt.Sprintf("%s (tid %d)", l.Comm, l.TID)
		add("launch_cpu", "launch thread on a CPU", "% of a core", 0, of, jd.Series.LaunchRun)
		add("launch_wait", "launch thread waiting for a CPU", "%", -1, of, jd.Series.LaunchWait)
	}
	if p := v.Target(); p != nil {
		add("job_cpu", "job's root process CPU", "% of a core", 0, fmt.Sprintf("%s (pid %d)", p.Info.Comm, p.Key.PID), p.CPUPct)
	}
	if v.Host != nil {
		add("host_busy", "host CPUs busy", "%", 0, "all CPUs", v.Host.BusyPct)
	}
	if len(in.Frozen.COW) > 0 {
		copied, workers := 0.0, 0
		for _, l := range in.Frozen.COW {
			copied += l.Copied
			workers += l.Workers
		}
		run.Metrics = append(run.Metrics, cowMetric(copied, workers, len(v.Intervals)))
	}
	run.Deaths = deathsOf(jd.Deaths)
	return &Input{File: name, Kind: KindRecording, Host: tl.Meta.Hostname, Run: run}
}

// deathsOf are the judge's deaths of a run that the kernel told (a kill
// or a crash, with its time), as compare sets them side by side: the
// member each was, where and when it died, as the judge wrote them. A
// member only the sampler saw go has no kernel time to order it by.
func deathsOf(ds []judge.Death) []Death {
	var out []Death
	for _, d := range ds {
		at := d.When()
		if at.IsZero() || d.Cause == "exited" {
			continue
		}
		out = append(out, Death{At: at, Resolution: resolution(d.Time, at), PID: d.PID, Comm: safetext.Cap(d.Comm, 64), Member: d.Member,
			Cause: d.Cause, Where: safetext.Cap(d.Where, 200), Line: safetext.Cap(d.Line, 200)})
	}
	return out
}

// cowMetric is what the job's forked workers hold as private copies of
// their parent's memory (copy-on-write) at the end of the window: a level
// read at the window's end, so it has no per-interval spread.
func cowMetric(copied float64, workers, intervals int) *Metric {
	return &Metric{Key: "worker_cow_copied", Name: "forked workers' copied memory", Unit: "MiB", Better: -1,
		P10: math.NaN(), P50: math.NaN(), P90: math.NaN(), Mean: copied / (1 << 20), N: intervals,
		Of: fmt.Sprintf("%d forked workers, at the end of the window", workers)}
}
