package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/render"
)

// diagnose -o jsonl read through a pipe as it runs: interval lines arrive
// while the job is watched (not all at the end), follow the schema's
// interval_line, number every interval once in order with no gap, and show
// the job's phases (GPU busy, then idle for lack of submission); the last
// line is the report, whose window holds as many intervals. It is a busy
// job (a launch loop on the simulated device) and stays in the serial
// group: beside the light group's browsers and torch ranks its launch
// phase read as too little work.
func TestDiagnoseJSONLinesThroughAPipe(t *testing.T) {
	livetest.Need(t)
	sock := simDevice(t)
	// diagnose waits for the command it launched: it ends a second after
	// the window. The GPU-bound phase is 4 s: on CI's loaded host the
	// window's first tick came 2.7 s after the start, with 8 intervals of a
	// 3 s phase left in it.
	cmdline := phases(t, 4, 5)
	cmd := exec.Command(gpufeed(t), append([]string{"diagnose", "--duration", "8s", "-o", "jsonl", "--"}, cmdline...)...)
	cmd.Env = append(os.Environ(), "GPUFEED_SIMDEV="+sock)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()

	c := jsonschema.NewCompiler()
	schemaFile, _ := filepath.Abs(filepath.Join("..", "..", "docs", "gpufeed.schema.json"))
	lineSchema, err := c.Compile(schemaFile + "#/$defs/interval_line")
	if err != nil {
		t.Fatal(err)
	}
	var lines []render.IntervalLine
	var arrived []time.Duration
	var last string
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, `{"type":"interval"`) {
			last = l
			break
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(l))
		if err != nil {
			t.Fatalf("line %d is not JSON: %v", len(lines), err)
		}
		if err := lineSchema.Validate(doc); err != nil {
			t.Fatalf("line %d does not follow interval_line: %v\n%s", len(lines), err, l)
		}
		var il render.IntervalLine
		if err := json.Unmarshal([]byte(l), &il); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, il)
		arrived = append(arrived, time.Since(start))
	}
	if last == "" {
		t.Fatalf("no report line after %d interval lines; stderr: %s", len(lines), stderr.String())
	}
	ended := time.Since(start)
	validateSchema(t, last)
	var rep struct {
		Window struct {
			Samples int `json:"samples"`
		} `json:"window"`
		Series struct {
			StartNS        []int64    `json:"start_ns"`
			GPUUtilPercent []*float64 `json:"gpu_util_percent"`
		} `json:"series"`
	}
	if err := json.Unmarshal([]byte(last), &rep); err != nil {
		t.Fatal(err)
	}
	if len(lines) < 40 || len(lines) != rep.Window.Samples-1 {
		t.Fatalf("%d interval lines, the report's window has %d samples", len(lines), rep.Window.Samples)
	}
	// Streamed: the first lines came seconds before the report.
	if ended-arrived[10] < 3*time.Second {
		t.Errorf("line 10 arrived at %v, the report at %v: the lines were not streamed", arrived[10], ended)
	}
	// The phases are timed from the workload's own start, which a loaded
	// host delays by a second or more after the window's: they are found by
	// their order, not by fixed times. The launch-bound phase is the idle
	// intervals for submission after the GPU-bound phase's last busy one
	// (the interpreter's start-up before the first phase may read idle for
	// submission too).
	busy, launchIdle, lastBusy := 0, 0, -1
	for i, l := range lines {
		if l.Index != i || (i > 0 && l.StartNS != lines[i-1].EndNS) || l.EndNS <= l.StartNS {
			t.Fatalf("line %d: index %d, %d..%d after %d: not one line per interval in order", i, l.Index, l.StartNS, l.EndNS, lines[max(0, i-1)].EndNS)
		}
		if l.GPUUtilPercent != nil && *l.GPUUtilPercent > 90 {
			busy++
			lastBusy = i
		}
	}
	for _, l := range lines[lastBusy+1:] {
		if l.IdleCause != nil && *l.IdleCause == "submission-bound" {
			launchIdle++
		}
	}
	if busy < 5 || launchIdle < 10 {
		t.Errorf("%d busy intervals in the GPU-bound phase, %d idle for submission after its last one: want both phases seen, in order", busy, launchIdle)
	}
	// The report carries the series the lines streamed: one entry per
	// interval, the same measurements.
	if len(rep.Series.StartNS) != len(lines) || len(rep.Series.GPUUtilPercent) != len(lines) {
		t.Fatalf("the report's series has %d intervals (%d GPU readings), the stream %d lines", len(rep.Series.StartNS), len(rep.Series.GPUUtilPercent), len(lines))
	}
	for i, l := range lines {
		a, b := l.GPUUtilPercent, rep.Series.GPUUtilPercent[i]
		if l.StartNS != rep.Series.StartNS[i] || (a == nil) != (b == nil) || (a != nil && *a != *b) {
			t.Fatalf("interval %d: line starts at %d with GPU %v, the report's series at %d with %v", i, l.StartNS, ptrText(a), rep.Series.StartNS[i], ptrText(b))
		}
	}
	if w := lines[len(lines)-1].Window; w.Class != "submission-bound" {
		t.Errorf("the last window's verdict is %q, want submission-bound", w.Class)
	}
	t.Logf("%d lines, first at %v, report at %v; last window %s", len(lines), arrived[0], ended, lines[len(lines)-1].Window.Class)
}

// Only the live commands stream intervals.
func TestJSONLinesOnlyLive(t *testing.T) {
	for _, args := range [][]string{
		{"report", "-o", "jsonl", "testdata/trainer.gpufeed"},
		{"trace", "-o", "jsonl", "../../testdata/traces/ns_resolution_trace"},
		{"check", "-o", "jsonl"},
	} {
		out, stderr, code := run(t, args...)
		if code != 2 || out != "" || !strings.Contains(stderr, "-o/--output wants an output format: text, json or html (-o jsonl streams a live run's intervals: diagnose, demo)") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
}

func ptrText(p *float64) string {
	if p == nil {
		return "null"
	}
	return strconv.FormatFloat(*p, 'g', -1, 64)
}
