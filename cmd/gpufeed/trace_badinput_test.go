package main

import (
	"bytes"
	"compress/gzip"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/tracegen"

	_ "modernc.org/sqlite"
)

// Broken input for `gpufeed trace`, run as a user would: the real binary on
// real traces (HTA's test data) cut, damaged or surrounded by files that are
// not traces. docs/TRACE.md's broken-input table lists these cases.

var (
	nsTrace      = "../../testdata/traces/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
	rankTraces   = "../../testdata/traces/trace_filter"
	alexnetTrace = "../../testdata/traces/critical_path/alexnet/benchmark_result_2869224_1695835535_trace.json.gz"
)

// runIn runs gpufeed with stdin and returns stdout, stderr, the exit
// status and the peak resident memory in bytes. A named pipe in a
// directory used to block gpufeed forever: two minutes end any run.
func runIn(t *testing.T, stdin []byte, args ...string) (string, string, int, int64) {
	t.Helper()
	r := clitest.Run(t, gpufeed(t), clitest.Cmd{Args: args, Stdin: stdin, Timeout: 2 * time.Minute, PeakRSS: true})
	return r.Stdout, r.Stderr, r.Code, r.MaxRSS
}

// readCounts decodes the counts of each rank from `trace -o json`.
func readCounts(t *testing.T, out string) []map[string]int64 {
	t.Helper()
	var res struct {
		Reports []struct {
			Counts map[string]int64 `json:"counts"`
		} `json:"reports"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%.300s", err, out)
	}
	var c []map[string]int64
	for _, r := range res.Reports {
		c = append(c, r.Counts)
	}
	return c
}

// TestTraceCutGzipMemory: a .json.gz cut short ends in deflate data, which
// a reader taking its last four bytes for gzip's size trailer read as up to
// 4 GiB, pre-sized the model and set the heap limit from it (a 1 MB cut of
// a 15 MB trace peaked at 480 MB). The peak must stay within the documented
// bound (docs/PERFORMANCE.md): 64 MiB plus a quarter of the JSON the file
// holds.
func TestTraceCutGzipMemory(t *testing.T) {
	b, err := os.ReadFile(nsTrace)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// These cuts end in bytes that claim 0.97 GB and 2.9 GB.
	for _, cut := range []int{709_000, 1_000_000} {
		p := filepath.Join(dir, "cut.json.gz")
		if err := os.WriteFile(p, b[:cut], 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, code, rss := runIn(t, nil, "trace", "-o", "json", "--workers", "2", p)
		if code != 0 {
			t.Fatalf("cut at %d: exit %d: %s", cut, code, stderr)
		}
		if !strings.Contains(out, "truncated gzip file") {
			t.Errorf("cut at %d: no truncation warning", cut)
		}
		held, ok := readCounts(t, out)[0]["decoded_bytes"]
		if !ok || held <= 0 {
			t.Fatalf("cut at %d: no decoded_bytes in the counts: the bound depends on it", cut)
		}
		if bound := 64<<20 + held/4; rss > bound || rss == 0 {
			t.Errorf("cut at %d (%d bytes of JSON): peak RSS %d MiB, over the bound of %d MiB", cut, held, rss>>20, bound>>20)
		}
	}
}

// TestTraceDirectoryWithBadFiles: one bad file must not sink a directory.
// The good ranks are reported, every skipped file is listed with its
// reason, files that are not traces are not ranks, and the exit status is
// 0 because something was read.
func TestTraceDirectoryWithBadFiles(t *testing.T) {
	dir := t.TempDir()
	for _, r := range []string{"sampled_rank-0.json.gz", "sampled_rank-1.json.gz"} {
		b, err := os.ReadFile(filepath.Join(rankTraces, r))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, r), b, 0o644)
	}
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(i*7919>>3 ^ i)
	}
	os.WriteFile(filepath.Join(dir, "rank2.json"), random, 0o644)
	os.Symlink("/nonexistent/rank3.json", filepath.Join(dir, "rank3.json"))
	os.Symlink("rank4.json", filepath.Join(dir, "rank4.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"lr": 0.001, "batch_size": 64, "epochs": 3}`), 0o644)
	os.WriteFile(filepath.Join(dir, "locked.json"), random, 0o000)
	if err := syscall.Mkfifo(filepath.Join(dir, "rank5.json"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", filepath.Join(dir, "app.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE users (id INTEGER, name TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	out, stderr, code, _ := runIn(t, nil, "trace", "-v", dir)
	if code != 0 {
		t.Fatalf("exit %d, want 0 (two ranks were read): %s", code, stderr)
	}
	if n := strings.Count(out, "VERDICT: "); n != 2 || !strings.Contains(out, "sampled_rank-0.json.gz, rank 0") || !strings.Contains(out, "sampled_rank-1.json.gz, rank 1") {
		t.Errorf("%d reports, want the two good ranks:\n%s", n, out)
	}
	if strings.Contains(out, "VERDICT: inconclusive (confidence 0%) — config.json") {
		t.Errorf("config.json was analysed as a rank")
	}
	i := strings.Index(out, "NOT READ: 7 file(s)")
	if i < 0 {
		t.Fatalf("no list of the files not read:\n%s\nstderr: %s", out, stderr)
	}
	notRead := out[i:]
	for file, why := range map[string]string{
		"app.db":      "an SQLite database, but not an Nsight Systems export",
		"config.json": `not a Chrome trace: a JSON object with no "traceEvents" array (its keys: "lr", "batch_size", "epochs")`,
		"rank2.json":  "not a trace: expected Chrome-trace JSON",
		"rank3.json":  "a symbolic link to /nonexistent/rank3.json, which does not exist",
		"rank4.json":  "a symbolic link loop",
		"rank5.json":  "not a regular file (a named pipe)",
		"locked.json": "", // permission denied, or (as root) not a trace
	} {
		if !holds(notRead, filepath.Join(dir, file)+": "+why) {
			t.Errorf("%s: not listed with %q:\n%s", file, why, notRead)
		}
	}
	if !strings.Contains(stderr, "7 of 9 files not read") {
		t.Errorf("stderr %q: want a note of the files not read", stderr)
	}
	// The two ranks are compared, and only they.
	if !strings.Contains(out, "RANKS: 2 compared") {
		t.Errorf("no comparison of the two ranks:\n%s", out)
	}
	js, _, code, _ := runIn(t, nil, "trace", "-o", "json", dir)
	var res struct {
		Reports []json.RawMessage `json:"reports"`
		Skipped []struct{ File, Reason string }
	}
	if err := json.Unmarshal([]byte(js), &res); err != nil || code != 0 || len(res.Reports) != 2 || len(res.Skipped) != 7 {
		t.Errorf("JSON: exit %d, %d reports, %d skipped (%v)", code, len(res.Reports), len(res.Skipped), err)
	}

	// Nothing readable: exit 2 and every file with its reason.
	bad := t.TempDir()
	os.WriteFile(filepath.Join(bad, "a.json"), []byte(`{}`), 0o644)
	os.Symlink("/nonexistent", filepath.Join(bad, "b.json"))
	_, stderr, code, _ = runIn(t, nil, "trace", bad)
	if code != 2 || !strings.Contains(stderr, "none of the 2 files could be read as a trace: ") || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, `\x0a`) ||
		!strings.Contains(stderr, "a.json: not a Chrome trace: an empty JSON object") || !strings.Contains(stderr, "b.json: a symbolic link to /nonexistent") {
		t.Errorf("nothing readable: exit %d, stderr %q", code, stderr)
	}
}

// TestTraceFromPipe: the format sniff used to consume a pipe before the
// decoder reopened it ("byte offset 0: expected '{'"); "-" was not
// accepted. Each way gives the report the file gives.
func TestTraceFromPipe(t *testing.T) {
	b, err := os.ReadFile(alexnetTrace)
	if err != nil {
		t.Fatal(err)
	}
	// What identifies a report apart from the file's name: the counts, the
	// verdict, the shares and the temporal breakdown.
	numbers := func(out string) string {
		var res struct {
			Reports []struct {
				Counts   json.RawMessage `json:"counts"`
				Temporal json.RawMessage `json:"temporal_breakdown"`
				Shares   json.RawMessage `json:"shares"`
				Verdict  struct {
					Class      string  `json:"class"`
					Confidence float64 `json:"confidence_percent"`
				} `json:"verdict"`
			} `json:"reports"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Reports) != 1 {
			return "unreadable: " + out
		}
		r := res.Reports[0]
		return string(r.Counts) + string(r.Temporal) + string(r.Shares) + r.Verdict.Class
	}
	want, _, code, _ := runIn(t, nil, "trace", "-o", "json", alexnetTrace)
	if code != 0 {
		t.Fatal("the file itself does not read")
	}
	for _, tc := range []struct {
		what  string
		stdin []byte
		args  []string
	}{
		{"- (gzip)", b, []string{"trace", "-o", "json", "-"}},
		{"/dev/stdin", b, []string{"trace", "-o", "json", "/dev/stdin"}},
		{"process substitution", nil, []string{"bash", "-c", `"$0" trace -o json <(zcat "$1")`, gpufeed(t), alexnetTrace}},
	} {
		var out string
		if tc.args[0] == "bash" {
			cmd := exec.Command(tc.args[0], tc.args[1:]...)
			var o, e bytes.Buffer
			cmd.Stdout, cmd.Stderr = &o, &e
			if err := cmd.Run(); err != nil {
				t.Errorf("%s: %v: %s", tc.what, err, e.String())
				continue
			}
			out = o.String()
		} else {
			var stderr string
			out, stderr, code, _ = runIn(t, tc.stdin, tc.args...)
			if code != 0 {
				t.Errorf("%s: exit %d: %s", tc.what, code, stderr)
				continue
			}
		}
		if numbers(out) != numbers(want) {
			t.Errorf("%s: the report differs from the file's:\n%.300s", tc.what, out)
		}
	}
	// A pipe is named as one.
	cmd := exec.Command("bash", "-c", `"$0" trace <(zcat "$1")`, gpufeed(t), alexnetTrace)
	if o, err := cmd.Output(); err != nil || !strings.Contains(string(o), "— pipe (fd ") {
		t.Errorf("process substitution: %v, report %.120q", err, o)
	}
	// Plain JSON through "-" too, named "stdin" in the report.
	zr, _ := gzip.NewReader(bytes.NewReader(b))
	var plain bytes.Buffer
	plain.ReadFrom(zr)
	out, stderr, code, _ := runIn(t, plain.Bytes(), "trace", "-")
	if code != 0 || !strings.Contains(out, "— stdin, rank 0") {
		t.Errorf("plain JSON on stdin: exit %d %s\n%.300s", code, stderr, out)
	}
	if js, _, _, _ := runIn(t, plain.Bytes(), "trace", "-o", "json", "-"); numbers(js) != numbers(want) {
		t.Errorf("plain JSON on stdin: the report differs from the file's")
	}
}

// TestTraceNotATrace: JSON that is no trace used to exit 0 with advice to
// record GPU activity. Each says what the file is not, and what it is when
// that can be told.
func TestTraceNotATrace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(s), 0o644)
		return p
	}
	for _, tc := range []struct {
		path string
		want string
	}{
		{write("empty.json", "{}\n"), "empty.json: not a Chrome trace: an empty JSON object ({})"},
		{write("config.json", `{"model": "resnet50", "lr": 0.1}`), `config.json: not a Chrome trace: a JSON object with no "traceEvents" array (its keys: "model", "lr")`},
		{"testdata/trainer.gpufeed", "trainer.gpufeed: not a Chrome trace: this is a gpufeed recording; judge it with: gpufeed report testdata/trainer.gpufeed"},
		{write("trailing.json", `{"traceEvents": []} {"traceEvents": []}`), "trailing.json: byte offset 20: expected the end of the file after the end of the trace"},
		{write("bad.json.gz", "\x1f\x8b this is not gzip"), "bad.json.gz: starts with gzip's magic bytes but is not a gzip stream: gzip: invalid header"},
	} {
		out, stderr, code, _ := runIn(t, nil, "trace", tc.path)
		if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
			t.Errorf("%s: exit %d, stderr %q, stdout %.80q; want exit 2 and %q", tc.path, code, stderr, out, tc.want)
		}
		if strings.Contains(stderr, "gzip: gzip:") {
			t.Errorf("%s: doubled prefix: %s", tc.path, stderr)
		}
	}
	// Events without "ph" are counted and warned about, not lost silently.
	p := write("noph.json", `{"traceEvents": [{"name": "k", "cat": "kernel", "ts": 1, "dur": 2, "pid": 0, "tid": 7},
{"ph": "X", "name": "k", "cat": "kernel", "ts": 5, "dur": 2, "pid": 0, "tid": 7, "args": {"stream": 7}}]}`)
	out, _, code, _ := runIn(t, nil, "trace", p)
	if code != 0 || !strings.Contains(out, `WARNING: `+p+`: 1 event has no "ph"`) || !strings.Contains(out, "1 without a phase") {
		t.Errorf("events without ph: exit %d\n%s", code, out)
	}
}

// TestTraceNegativeTimestamp: docs/TRACE.md says an event with a negative
// ts is dropped; kept, one such kernel stretched the analysed span of a
// generated trace from its real length to over 1000 s.
func TestTraceNegativeTimestamp(t *testing.T) {
	var buf bytes.Buffer
	if _, err := tracegen.Generate(&buf, tracegen.Config{Pattern: tracegen.Sync, Steps: 3, Seed: 2, Rank: -1}); err != nil {
		t.Fatal(err)
	}
	good := buf.String()
	i := strings.Index(good, `"traceEvents": [`) + len(`"traceEvents": [`)
	// A kernel and the call that launched it, 1000 s before time 0.
	bad := good[:i] + `{"ph": "X", "cat": "kernel", "name": "early", "pid": 0, "tid": 7, "ts": -1000000000, "dur": 5, "args": {"device": 0, "stream": 7, "correlation": 999999}},
{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242, "ts": -1000000010, "dur": 5, "args": {"correlation": 999999}},` + good[i:]
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "good.json"), []byte(good), 0o644)
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(bad), 0o644)
	span := func(name string) (int64, string) {
		out, stderr, code, _ := runIn(t, nil, "trace", "-o", "json", filepath.Join(dir, name))
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, stderr)
		}
		var res struct {
			Reports []struct {
				Temporal struct {
					Span int64 `json:"span_ns"`
				} `json:"temporal_breakdown"`
				Warnings []string `json:"warnings"`
			} `json:"reports"`
		}
		json.Unmarshal([]byte(out), &res)
		return res.Reports[0].Temporal.Span, strings.Join(res.Reports[0].Warnings, "\n")
	}
	want, _ := span("good.json")
	got, warn := span("bad.json")
	if got != want || want == 0 {
		t.Errorf("span with a negative-ts kernel %d ns, without %d ns", got, want)
	}
	if !strings.Contains(warn, "dropped 2 events whose ts or dur is NaN, infinite, negative or missing") || !strings.Contains(warn, "negative ts") {
		t.Errorf("warnings %q", warn)
	}
}

// TestTraceSharedCorrelationIDs: every event sharing one correlation id
// linked every kernel to the first call and gave a "GPU-side wait" verdict
// built on those links. The links are not made, a warning says why, and the
// verdict does not judge from them.
func TestTraceSharedCorrelationIDs(t *testing.T) {
	var buf bytes.Buffer
	if _, err := tracegen.Generate(&buf, tracegen.Config{Pattern: tracegen.DataLoader, Steps: 3, Seed: 5, Rank: -1}); err != nil {
		t.Fatal(err)
	}
	shared := regexp.MustCompile(`"correlation": ?\d+`).ReplaceAllString(buf.String(), `"correlation": 1`)
	p := filepath.Join(t.TempDir(), "shared.json")
	os.WriteFile(p, []byte(shared), 0o644)
	out, stderr, code, _ := runIn(t, nil, "trace", "-v", p)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	head, _, _ := strings.Cut(out, "\n\n")
	if strings.Contains(head, "waiting on its own dependencies") || !strings.HasPrefix(head, "VERDICT: inconclusive") {
		t.Errorf("verdict judged from guessed links:\n%s", head)
	}
	if !strings.Contains(head, "a correlation id that is not unique") {
		t.Errorf("the verdict does not say why the gaps are not attributed:\n%s", head)
	}
	if !holds(out, "WARNING: "+p+": correlation ids are not unique") {
		t.Errorf("no warning about the shared ids:\n%s", out)
	}
}
