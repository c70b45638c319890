package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --perfetto writes the timeline beside the report, which is unchanged,
// and says on stderr what it wrote; report, trace and demo take it.
func TestPerfettoFlagWritesTheTimeline(t *testing.T) {
	dir := t.TempDir()
	plain, _, code := run(t, "report", "testdata/trainer.gpufeed")
	if code != 0 {
		t.Fatalf("report: exit %d", code)
	}
	out := filepath.Join(dir, "trainer.pftrace")
	with, stderr, code := run(t, "report", "testdata/trainer.gpufeed", "--perfetto", out)
	if code != 0 || with != plain {
		t.Fatalf("report --perfetto: exit %d, report changed: %v", code, with != plain)
	}
	if !strings.Contains(stderr, "wrote the timeline to "+out+" (Perfetto, ") || !strings.Contains(stderr, "ui.perfetto.dev") {
		t.Errorf("stderr %q does not say what was written", stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) < 1000 || b[0] != 0x0a { // Trace.packet (field 1, bytes)
		t.Fatalf("%s: %d bytes, %v", out, len(b), err)
	}

	tr := filepath.Join(dir, "trace.pftrace")
	_, stderr, code = run(t, "trace", filepath.Join("..", "..", "testdata", "traces", "critical_path", "simple_add",
		"benchmark_result_493459_1694039959_trace.json.gz"), "--perfetto", tr)
	if code != 0 || !strings.Contains(stderr, "wrote the timeline to "+tr) {
		t.Fatalf("trace --perfetto: exit %d, stderr %q", code, stderr)
	}
	if b, _ := os.ReadFile(tr); !bytes.Contains(b, []byte("idle gaps (by cause)")) {
		t.Error("the trace's timeline has no idle-gap track")
	}
}

// A file that cannot be written fails before any work, as a usage error
// (diagnose's is 125, as for --record: its other statuses are the command's).
func TestPerfettoUnwritableFailsEarly(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "missing", "x.pftrace")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"report", "testdata/trainer.gpufeed", "--perfetto", bad}, 2},
		{[]string{"trace", "testdata/trainer.gpufeed", "--perfetto", bad}, 2},
		{[]string{"demo", "idle-sleep", "--perfetto", bad}, 2},
		{[]string{"diagnose", "--duration", "2", "--perfetto", bad, "--", "true"}, 125},
	} {
		args := c.args
		out, stderr, code := run(t, args...)
		if code != c.code || out != "" || !strings.Contains(stderr, "--perfetto "+bad) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d naming the file", args, code, out, stderr, c.code)
		}
	}
}
