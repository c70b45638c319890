package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/golden"
)

// runTrace runs gpufeed with args: what it wrote (standard output, then
// standard error), and the error it ended with.
func runTrace(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, stderr, code := run(t, args...)
	if code != 0 {
		return out + stderr, fmt.Errorf("exit status %d: %s", code, stderr)
	}
	return out + stderr, nil
}

// TestTraceGolden runs `gpufeed trace` end to end on real and edge-case
// traces and compares the output with golden files (go test -update).
func TestTraceGolden(t *testing.T) {
	for _, tc := range []struct {
		name, path, format string
		flags              []string
	}{
		{"negative_queue", "../../testdata/traces/negative_queue_length_values_check/rank0.json.gz", "text", nil},
		{"ns_resolution", "../../testdata/traces/ns_resolution_trace", "text", nil},
		{"ns_resolution_verbose", "../../testdata/traces/ns_resolution_trace", "text", []string{"-v"}},
		{"ns_resolution_json", "../../testdata/traces/ns_resolution_trace", "json", nil},
		{"two_ranks", "../../testdata/traces/trace_filter", "text", nil},
		{"two_ranks_rank1", "../../testdata/traces/trace_filter", "text", []string{"--rank", "1"}},
		{"two_ranks_verbose", "../../testdata/traces/trace_filter", "text", []string{"-v"}},
		{"two_ranks_json", "../../testdata/traces/trace_filter", "json", nil},
		{"cpu_only", "../../testdata/traces/cpu_only", "text", nil},
		{"alexnet", "../../testdata/traces/critical_path/alexnet", "text", nil},
		{"alexnet_verbose", "../../testdata/traces/critical_path/alexnet", "text", []string{"-v"}},
		{"truncated", "../../testdata/trace-edge/truncated.json", "text", nil},
		{"truncated_json", "../../testdata/trace-edge/truncated.json", "json", nil},
		{"nan", "../../testdata/trace-edge/nan.json", "text", nil},
		{"mtia", "../../testdata/mtia/mtia_fixture.json", "text", nil},
		{"mtia_json", "../../testdata/mtia/mtia_fixture.json", "json", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runTrace(t, append(append([]string{"trace", "-o", tc.format}, tc.flags...), tc.path)...)
			if err != nil {
				t.Fatalf("gpufeed trace: %v\n%s", err, out)
			}
			ext := ".txt"
			if tc.format == "json" {
				ext = ".json"
				var v map[string]any
				if err := json.Unmarshal([]byte(out), &v); err != nil {
					t.Fatalf("not JSON: %v", err)
				}
				out = stableJSON(out)
			} else if !strings.HasPrefix(out, "VERDICT: ") && !strings.HasPrefix(out, "RANKS: ") {
				t.Errorf("text output does not lead with the verdict: %.80q", out)
			}
			golden.Check(t, filepath.Join("..", "..", "testdata", "golden", "cli", tc.name+ext), out)
		})
	}
}

func TestTraceEdgeWarnings(t *testing.T) {
	out, _ := runTrace(t, "trace", "../../testdata/trace-edge/truncated.json")
	if !strings.Contains(out, "WARNING: ../../testdata/trace-edge/truncated.json: byte offset ") || !strings.Contains(out, "truncated") {
		t.Errorf("truncated trace: no warning with the file and byte offset:\n%s", out)
	}
	out, _ = runTrace(t, "trace", "../../testdata/trace-edge/nan.json")
	if !strings.Contains(out, "NaN") || !strings.Contains(out, "byte offset") {
		t.Errorf("NaN trace: no warning naming NaN and the byte offset:\n%s", out)
	}
}

func TestTraceErrors(t *testing.T) {
	dir := t.TempDir()
	notTrace := filepath.Join(dir, "notes.txt")
	os.WriteFile(notTrace, []byte("hello"), 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"traceEvents": [{"ph": "X" "cat": "kernel"}]}`), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trace"}, "requires at least 1 arg"},
		{[]string{"trace", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"trace", notTrace}, "not a trace"},
		{[]string{"trace", bad}, "bad.json: byte offset 28: expected ',' or '}' in an event"},
		{[]string{"trace", "-o", "xml", bad}, `-o/--output wants an output format: text, json or html; got "xml"`},
		{[]string{"trace", dir + "/"}, "bad.json"},
	} {
		out, err := runTrace(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("gpufeed %v: err = %v (out %q), want %q", tc.args, err, out, tc.want)
		}
	}
}

// TestTraceVerdictWording runs `gpufeed trace` on every real trace and the
// MTIA fixture: an inconclusive header never sits above a finding marked
// "(verdict)", the report says what its confidence means, and runtime calls
// are named as the trace names them (no CUDA names in a HIP or MTIA trace).
func TestTraceVerdictWording(t *testing.T) {
	paths, _ := filepath.Glob("../../testdata/traces/*")
	more, _ := filepath.Glob("../../testdata/traces/critical_path/*")
	paths = append(paths, more...)
	paths = append(paths, "../../testdata/mtia/mtia_fixture.json")
	cudaName := regexp.MustCompile(`\bcu(da)?[A-Z][A-Za-z]+`)
	n := 0
	for _, p := range paths {
		if st, err := os.Stat(p); err != nil || (st.IsDir() && strings.HasSuffix(p, "critical_path")) || strings.Contains(p, "LICENSE") || strings.HasSuffix(p, ".md") {
			continue
		}
		out, err := runTrace(t, "trace", "-v", p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		n++
		head, _, _ := strings.Cut(out, "\n")
		if strings.HasPrefix(head, "VERDICT: inconclusive") && strings.Contains(out, "(verdict)") {
			t.Errorf("%s: the header is inconclusive but a finding is marked (verdict):\n%s", p, out)
		}
		if !strings.Contains(out, "\nCONFIDENCE: ") {
			t.Errorf("%s: the report does not say what its confidence means:\n%.600s", p, out)
		}
		if strings.Contains(p, "amd_trace") || strings.Contains(p, "mtia") {
			if m := cudaName.FindAllString(out, -1); len(m) > 0 {
				t.Errorf("%s: CUDA names in a trace that has none: %q", p, m)
			}
		}
		if strings.Contains(out, " 1 GPU operations") {
			t.Errorf("%s: \"1 GPU operations\": one operation is singular:\n%.300s", p, out)
		}
		if strings.Contains(p, "amd_trace") && !strings.Contains(out, "hipLaunchKernel") {
			t.Errorf("%s: hipLaunchKernel is never named", p)
		}
	}
	if n < 12 {
		t.Errorf("ran on %d traces, want every testdata trace", n)
	}
}

// A trace whose copies carry no byte counts says so: the evidence is "not
// recorded" with a null value, the copy totals' bytes null, never 0 B.
func TestTraceBytesNotRecordedIsNull(t *testing.T) {
	out, err := runTrace(t, "trace", "-o", "json", "../../testdata/trace-edge/copy-no-bytes.json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res struct {
		Reports []struct {
			Rules struct {
				Pageable struct {
					Count int64  `json:"count"`
					Bytes *int64 `json:"bytes"`
				} `json:"pageable_async_copies"`
			} `json:"rules"`
			Findings []struct {
				ID       string `json:"id"`
				Evidence []struct {
					What  string   `json:"what"`
					Value *float64 `json:"value"`
					Text  string   `json:"text"`
				} `json:"evidence"`
			} `json:"findings"`
		} `json:"reports"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Reports) != 1 {
		t.Fatalf("%v: %s", err, out)
	}
	r := res.Reports[0]
	if r.Rules.Pageable.Count == 0 || r.Rules.Pageable.Bytes != nil {
		t.Errorf("pageable copies: count %d, bytes %v: want copies and null bytes", r.Rules.Pageable.Count, r.Rules.Pageable.Bytes)
	}
	seen := false
	for _, f := range r.Findings {
		for _, e := range f.Evidence {
			if e.What == "bytes copied" {
				seen = true
				if e.Value != nil || e.Text != "not recorded" {
					t.Errorf("%s: bytes copied: value %v text %q, want null and \"not recorded\"", f.ID, e.Value, e.Text)
				}
			}
		}
	}
	if !seen {
		t.Errorf("no bytes-copied evidence:\n%s", out)
	}
	golden.Check(t, filepath.Join("..", "..", "testdata", "golden", "cli", "copy_no_bytes_json.json"), stableJSON(out))
}

// TestTraceOutputsHaveNoInternalReferences runs gpufeed trace, text and
// JSON, on every trace in testdata (each rank directory and edge case):
// what it prints names no internal reference.
func TestTraceOutputsHaveNoInternalReferences(t *testing.T) {
	var paths []string
	dirs, err := filepath.Glob(filepath.Join("..", "..", "testdata", "traces", "*"))
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "traces", "critical_path", "*"))
	for _, d := range dirs {
		if files, _ := filepath.Glob(filepath.Join(d, "*.json*")); len(files) > 0 {
			paths = append(paths, d) // a rank directory (critical_path holds four)
		}
	}
	edge, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "trace-edge", "*.json"))
	mtia, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "mtia", "*.json"))
	paths = append(append(append(paths, sub...), edge...), mtia...)
	if len(paths) < 14 {
		t.Fatalf("%d traces found: the globs missed them", len(paths))
	}
	for _, p := range paths {
		for _, format := range []string{"text", "json"} {
			out, _, _ := run(t, "trace", "-o", format, p)
			if out == "" {
				t.Errorf("%s (%s): no output", p, format)
			}
			for _, r := range golden.InternalReferences(out) {
				t.Errorf("%s (%s): an internal reference no user can follow: %s", p, format, r)
			}
		}
	}
}
