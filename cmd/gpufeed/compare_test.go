package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/golden"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// compareDoc is what the tests read of compare's JSON document.
type compareDoc struct {
	Nodes *struct {
		Differ []struct {
			ID  string   `json:"id"`
			Odd []string `json:"odd"`
		} `json:"differ"`
	} `json:"nodes"`
	Runs *struct {
		Moves []struct {
			Key      string   `json:"key"`
			Delta    *float64 `json:"delta_value"`
			Outside  bool     `json:"beyond_noise"`
			Measured bool     `json:"noise_measured"`
			Worse    int      `json:"worse"`
		} `json:"moves"`
	} `json:"runs"`
	Deaths     []struct{ Label, Cause string } `json:"deaths"`
	FirstDeath *struct {
		Label     string  `json:"label"`
		PID       int     `json:"pid"`
		Member    *string `json:"member"`
		Cause     string  `json:"cause"`
		NextLabel *string `json:"next_label"`
		Sure      bool    `json:"order_known"`
	} `json:"first_death"`
	Differs bool `json:"differs"`
}

func compareJSON(t *testing.T, out string) compareDoc {
	t.Helper()
	var d compareDoc
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatalf("compare -o json: %v\n%.400s", err, out)
	}
	return d
}

// TestCompareGolden compares the check fixtures' documents (a healthy
// server, the same with a downgraded PCIe link, one whose job is bound to
// the far NUMA node) and recordings of the noisy-neighbour scenario made
// with gpufeed demo itself, with and without its neighbours (see
// testdata/compare/README.md), against golden text and JSON.
func TestCompareGolden(t *testing.T) {
	checks := filepath.Join("..", "..", "testdata", "check", "golden")
	runs := filepath.Join("..", "..", "testdata", "compare")
	for _, tc := range []struct {
		name     string
		files    []string
		code     int
		want     []string // lines or parts of them the text must hold
		verbose  bool
		validate func(t *testing.T, d compareDoc)
	}{
		{"compare-nodes", []string{filepath.Join(checks, "server.json"), filepath.Join(checks, "server-downgraded.json"), filepath.Join(checks, "wrong-numa.json")}, 1,
			[]string{"  pcie-link:gpu-0000:92:00.0: server-downgraded differs",
				"FAIL on server-downgraded: PCIe link downgraded: runs Gen3 x8, capable of Gen4 x16",
				"  numa-affinity: wrong-numa differs", "FAIL on wrong-numa: pid 4242: bound to the far NUMA node"}, true,
			func(t *testing.T, d compareDoc) {
				odd := map[string]string{}
				for _, c := range d.Nodes.Differ {
					odd[c.ID] = strings.Join(c.Odd, ",")
				}
				if odd["pcie-link:gpu-0000:92:00.0"] != "server-downgraded" || odd["numa-affinity"] != "wrong-numa" {
					t.Errorf("odd nodes %v: want the downgraded link on server-downgraded, the far NUMA node on wrong-numa", odd)
				}
				if _, ok := odd["pcie-link:gpu-0000:93:00.0"]; ok {
					t.Error("an alike link reported as differing")
				}
			}},
		{"compare-noisy-neighbour", []string{filepath.Join(runs, "alone.gpufeed"), filepath.Join(runs, "noisy.gpufeed")}, 1,
			[]string{"noisy kept its GPU busy 15.6 % of the time against alone's 43.2 %",
				"for the same work per step, noisy's steps take about 2.77 times as long"}, false,
			func(t *testing.T, d compareDoc) {
				for _, m := range d.Runs.Moves {
					if m.Key == "gpu_busy" && (!m.Outside || m.Worse != 1 || *m.Delta >= 0) {
						t.Errorf("GPU busy move %+v: want it lower beyond the noise, worse", m)
					}
					if m.Key == "launch_wait" && (!m.Outside || m.Worse != 1) {
						t.Errorf("run-queue wait move %+v: want it higher beyond the noise, worse", m)
					}
				}
			}},
		{"compare-same-scenario", []string{filepath.Join(runs, "alone.gpufeed"), filepath.Join(runs, "alone2.gpufeed")}, 0,
			[]string{"Inside the noise, no measurable change: GPU busy -1.31 points (±19.6)", "nothing differs beyond the noise"}, false,
			func(t *testing.T, d compareDoc) {
				for _, m := range d.Runs.Moves {
					if m.Outside || !m.Measured {
						t.Errorf("%s: %+v: two runs of one scenario alone differ only within their noise", m.Key, m)
					}
				}
			}},
		{"compare-reports", []string{filepath.Join(runs, "alone.json"), filepath.Join(runs, "noisy.json")}, 1,
			[]string{"noisy kept its GPU busy 15.6 % of the time against alone's 43.2 %", "launch thread waiting for a CPU (mean)"}, false, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, format := range []string{"text", "json"} {
				args := append([]string{"compare", "-o", format}, tc.files...)
				out, stderr, code := run(t, args...)
				if code != tc.code || stderr != "" {
					t.Fatalf("compare -o %s: exit %d (want %d), stderr %q\n%s", format, code, tc.code, stderr, out)
				}
				if format == "json" {
					golden.Check(t, filepath.Join("..", "..", "testdata", "golden", "cli", tc.name+".json"), out)
					d := compareJSON(t, out)
					if d.Differs != (tc.code == 1) {
						t.Errorf("differs %v with exit %d", d.Differs, code)
					}
					if tc.validate != nil {
						tc.validate(t, d)
					}
					continue
				}
				golden.Check(t, filepath.Join("..", "..", "testdata", "golden", "cli", tc.name+".txt"), out)
				for _, w := range tc.want {
					if !strings.Contains(out, w) {
						t.Errorf("text lacks %q", w)
					}
				}
			}
			if tc.verbose {
				out, _, _ := run(t, append([]string{"compare", "-v"}, tc.files...)...)
				golden.Check(t, filepath.Join("..", "..", "testdata", "golden", "cli", tc.name+"_verbose.txt"), out)
			}
		})
	}
}

// TestCompareBadInput: what compare cannot read is a usage error naming the
// file and, for a document, the place; a truncated recording is compared on
// what it holds, with a warning.
func TestCompareBadInput(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join("..", "..", "testdata", "compare")
	good := filepath.Join(runs, "alone.json")
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		file, want string
	}{
		{write("empty.json", ""), "empty.json: empty file"},
		{write("text.json", "hello\n"), `text.json: not a gpufeed document: expected gpufeed's JSON output (-o json) or a recording; it starts with "hello\n"`},
		{write("json.json", "{\n  \"tool\": gpufeed\n}"), "json.json: line 2, column 11: invalid character 'g'"},
		{write("cut.json", string(b[:len(b)/2])), "cut.json: "},
		{write("other.json", `{"a": 1}`), "other.json: a JSON document, but not one gpufeed wrote"},
		{write("v1.json", `{"schema_version": 1, "tool": "gpufeed", "command": "check"}`), "v1.json: schema version 1; this gpufeed reads version 2"},
		{write("trace.json", `{"schema_version": 2, "tool": "gpufeed", "command": "trace"}`), "trace.json: a trace report"},
		{write("badtype.json", strings.Replace(string(b), `"duration_ns": `, `"duration_ns": "x`, 1)), "badtype.json: line "},
		{write("nocheck.json", `{"schema_version": 2, "tool": "gpufeed", "command": "check"}`), "nocheck.json: no \"results\""},
		{filepath.Join(dir, "missing.json"), "missing.json: no such file"},
	} {
		_, stderr, code := run(t, "compare", good, tc.file)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", filepath.Base(tc.file), code, stderr, tc.want)
		}
	}
	if _, stderr, code := run(t, "compare", good); code != 2 || !strings.Contains(stderr, "requires at least 2 arg") {
		t.Errorf("one file: exit %d, stderr %q", code, stderr)
	}
	rec, err := os.ReadFile(filepath.Join(runs, "noisy.gpufeed"))
	if err != nil {
		t.Fatal(err)
	}
	cut := write("cut.gpufeed", string(rec[:len(rec)*2/3]))
	out, stderr, code := run(t, "compare", filepath.Join(runs, "alone.gpufeed"), cut)
	if code != 1 || !strings.Contains(stderr, "warning: ") || !strings.Contains(out, "GPU busy") {
		t.Errorf("truncated recording: exit %d, stderr %q\n%s", code, stderr, out)
	}
}

// TestCompareRefusesHugeFilesBeforeReading: compare sniffs and caps before
// it reads, as report and trace do: a 2 GiB sparse file of zeros, and one
// that starts like JSON, are refused at once, in bounded memory (it read
// about 600 MB of the first before refusing it).
func TestCompareRefusesHugeFilesBeforeReading(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join("..", "..", "testdata", "compare", "alone.json")
	sparse := func(name, start string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(start), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 2<<30); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct{ file, want string }{
		{sparse("zeros.json", ""), `zeros.json: not a gpufeed document: expected gpufeed's JSON output (-o json) or a recording; it starts with "\x00\x00`},
		{sparse("big.json", `{"tool": "gpufeed", `), "big.json: 2048 MiB, larger than the 256 MiB a gpufeed document can be"},
	} {
		t0 := time.Now()
		r := clitest.Run(t, gpufeed(t), clitest.Cmd{Args: []string{"compare", good, tc.file}, Timeout: time.Minute, PeakRSS: true})
		took := time.Since(t0)
		if r.Code != 2 || !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %q", filepath.Base(tc.file), r.Code, r.Stderr, tc.want)
		}
		if r.MaxRSS > 64<<20 || took > 10*time.Second {
			t.Errorf("%s: refused after %v with %d MiB resident: it read the file before refusing it", filepath.Base(tc.file), took, r.MaxRSS>>20)
		}
	}
}

// TestCompareDeathsAcrossNodes: two jobs of three ranks each, one after the
// other, each losing a rank to a real OOM kill in its memory cgroup; each
// is diagnosed (one to a JSON report, one to a recording), as two nodes'
// collections would be. compare names the rank that died first, on the
// first job's node, and how long before the other.
func TestCompareDeathsAcrossNodes(t *testing.T) {
	livetest.Need(t)
	dir := t.TempDir()
	var files []string
	for i, victim := range []int{2, 1} {
		o, err := testjob.StartOOMRanksWith(t.Context(), testjob.RanksOptions{Victim: victim, Rounds: 20, WaitInOrder: true})
		if errors.Is(err, testjob.ErrUnavailable) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, "node-"+strconv.Itoa(i))
		args := []string{"diagnose", "--device", "none", "--pid", strconv.Itoa(o.PID), "--duration", "2s"}
		if i == 0 {
			name += ".json"
			args = append(args, "-o", "json")
		} else {
			name += ".gpufeed"
			args = append(args, "--record", name)
		}
		out, stderr, code := run(t, args...)
		o.Stop()
		if code != 0 {
			t.Fatalf("diagnose: exit %d: %s", code, stderr)
		}
		if strings.Contains(out, "kernel-log-not-visible") {
			t.Skip("the kernel log is not readable here")
		}
		if i == 0 {
			if err := os.WriteFile(name, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		files = append(files, name)
	}
	out, stderr, code := run(t, append([]string{"compare", "-o", "json"}, files...)...)
	if code != 0 && code != 1 {
		t.Fatalf("compare: exit %d: %s", code, stderr)
	}
	validateSchema(t, out)
	d := compareJSON(t, out)
	if len(d.Deaths) != 2 || d.FirstDeath == nil {
		t.Fatalf("deaths %+v, first %+v: want both OOM kills", d.Deaths, d.FirstDeath)
	}
	f := d.FirstDeath
	if f.Label != "node-0" || f.Cause != "oom-kill" || f.Member == nil || *f.Member != "rank 2" || f.NextLabel == nil || *f.NextLabel != "node-1" || !f.Sure {
		t.Errorf("first death %+v: want rank 2 on node-0, surely before node-1's", f)
	}
	text, _, _ := run(t, append([]string{"compare"}, files...)...)
	if !strings.Contains(text, "First to die: rank 2, pid ") || !strings.Contains(text, " on node-0 (oom-kill), ") {
		t.Errorf("text does not name the first death:\n%s", text)
	}
}

// TestCompareReadsStandardInput: "-" stands for one document on standard
// input, named "standard input" in the report and in errors; given twice
// it is refused, since standard input holds one document.
func TestCompareReadsStandardInput(t *testing.T) {
	checks := filepath.Join("..", "..", "testdata", "check", "golden")
	doc, err := os.ReadFile(filepath.Join(checks, "server-downgraded.json"))
	if err != nil {
		t.Fatal(err)
	}
	out, stderr, code, _ := runIn(t, doc, "compare", "-", filepath.Join(checks, "server.json"))
	if code != 1 || !strings.Contains(out, "standard input (check)") || !strings.Contains(out, "differ in status") {
		t.Errorf("exit %d (want 1: the downgraded node differs)\nstdout %s\nstderr %s", code, out, stderr)
	}
	if _, stderr, code, _ := runIn(t, []byte("{"), "compare", "-", filepath.Join(checks, "server.json")); code != 2 || !strings.Contains(stderr, "standard input: line 1, column ") {
		t.Errorf("a broken document on standard input: exit %d, %q", code, stderr)
	}
	if _, stderr, code, _ := runIn(t, doc, "compare", "-", "-"); code != 2 || !strings.Contains(stderr, `"-" given 2 times`) {
		t.Errorf("- twice: exit %d, %q", code, stderr)
	}
}
