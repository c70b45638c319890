package main

import (
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/scenario"
)

// TestDiagnoseFrozenJob runs the binary over a real hang (two processes each
// blocked in read() on a pipe), records it, and judges the recording: both
// reports lead with the stalled verdict and say where each thread waits,
// and the report of the recording equals the live one.
func TestDiagnoseFrozenJob(t *testing.T) {
	r, err := scenario.Start(t.Context(), scenario.PipeHang, nil)
	if errors.Is(err, scenario.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if _, err := r.Await(t.Context(), "waiting", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	bin := buildGpufeed(t)
	rec := filepath.Join(t.TempDir(), "hang.gpufeed")
	live, stderr, code := runGpufeed(t, bin, "diagnose", "--pid", strconv.Itoa(r.PID), "--duration", "2500ms", "--device", "none",
		"--record", rec, "--py-stacks")
	if code != 0 {
		t.Fatalf("diagnose exited %d: %s", code, stderr)
	}
	first := strings.SplitN(live, "\n", 2)[0]
	if !strings.HasPrefix(first, "VERDICT: stalled") || !strings.Contains(first, "The job is stalled") {
		t.Errorf("the report must lead with the stalled verdict: %q", first)
	}
	for _, want := range []string{"blocked-threads", "2 read on pipe", "anon_pipe_read", "python-stacks"} {
		if !strings.Contains(live, want) {
			t.Errorf("the report lacks %q:\n%s", want, live)
		}
	}
	replayed, stderr, code := runGpufeed(t, bin, "report", rec)
	if code != 0 {
		t.Fatalf("report exited %d: %s", code, stderr)
	}
	if replayed != live {
		t.Errorf("the report of the recording differs from the live report\n--- live\n%s\n--- replayed\n%s", live, replayed)
	}
}
