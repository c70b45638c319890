package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// TestDiagnoseFrozenJob runs the binary over a real hang (two processes each
// blocked in read() on a pipe), records it, and judges the recording: both
// reports lead with the stalled verdict and say where each thread waits,
// and the report of the recording equals the live one.
func TestDiagnoseFrozenJob(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	r, err := testjob.Start(t.Context(), testjob.PipeHang, nil)
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if _, err := r.Await(t.Context(), "waiting", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "hang.gpufeed")
	args := []string{"diagnose", "--pid", strconv.Itoa(r.PID), "--duration", "2500ms", "--device", "none", "--record", rec, "-v"}
	wants := []string{"blocked-threads", "2 read on pipe", "anon_pipe_read"}
	if _, err := exec.LookPath("py-spy"); err == nil {
		// --py-stacks without py-spy fails before the window
		// (TestPyStacksWithoutPySpyFailsFirst).
		args, wants = append(args, "--py-stacks"), append(wants, "python-stacks")
	}
	live, stderr, code := run(t, args...)
	if code != 0 {
		t.Fatalf("diagnose exited %d: %s", code, stderr)
	}
	first := strings.SplitN(live, "\n", 2)[0]
	if !strings.HasPrefix(first, "VERDICT: stalled") || !strings.Contains(first, "the job is stalled") {
		t.Errorf("the report must lead with the stalled verdict: %q", first)
	}
	for _, want := range wants {
		if !strings.Contains(live, want) {
			t.Errorf("the report lacks %q:\n%s", want, live)
		}
	}
	replayed, stderr, code := run(t, "report", "-v", rec)
	if code != 0 {
		t.Fatalf("report exited %d: %s", code, stderr)
	}
	if replayed != live {
		t.Errorf("the report of the recording differs from the live report\n--- live\n%s\n--- replayed\n%s", live, replayed)
	}
}

// TestDeadRankNamedAfterAttach: three ranks (RANK, LOCAL_RANK and
// WORLD_SIZE=3 in their environment, no LOCAL_WORLD_SIZE) under a launcher
// waiting for them; rank 2 is OOM-killed in its memory cgroup before
// gpufeed attaches to the launcher. The report names rank 2, says how sure
// the match is and why, and leads the stalled verdict with it. With a
// launcher that waits in rank order the dead rank is its zombie child; with
// one that reaps at once only the kernel log remembers it.
func TestDeadRankNamedAfterAttach(t *testing.T) {
	livetest.Need(t)
	for _, tc := range []struct {
		name    string
		inOrder bool
		sure    string
	}{
		{"zombie", true, "sure"},
		{"reaped", false, "likely"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := testjob.StartOOMRanksWith(t.Context(), testjob.RanksOptions{Victim: 2, Rounds: 20, WaitInOrder: tc.inOrder, NoLocalWorldSize: true})
			if errors.Is(err, testjob.ErrUnavailable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer o.Stop()
			for _, r := range diagnoseJSONAtOnce(t, []string{"3s", "4s"}, "--device", "none", "--pid", strconv.Itoa(o.PID)) {
				for _, f := range r.Findings {
					if f.ID == "kernel-log-not-visible" {
						t.Skip("the kernel log is not readable here:", f.Claim)
					}
				}
				died := findingsWith(r, "member-died")
				victim := o.Ranks[2]
				prefix := fmt.Sprintf("rank 2 (pid %d) was killed by the OOM killer at ", victim)
				if len(died) != 1 || !strings.HasPrefix(died[0].Claim, prefix) ||
					!strings.HasSuffix(died[0].Claim, "; ranks 0-1 wait in read on pipe; rank 2 by elimination ("+tc.sure+")") {
					t.Fatalf("want rank 2 named as killed; findings:\n%s", claims(r))
				}
				var how string
				for _, e := range died[0].Evidence {
					if strings.HasPrefix(e.What, "how pid ") && strings.Contains(e.What, "was matched to rank 2") {
						how = e.Text
					}
				}
				if !strings.HasPrefix(how, tc.sure+": ") || !strings.Contains(how, "WORLD_SIZE=3") || !strings.Contains(how, "ranks 0-1 alive") {
					t.Errorf("how sure and why: %q", how)
				}
				if r.Verdict == nil || r.Verdict.Class != finding.Stalled || !strings.HasPrefix(r.Verdict.Summary, "the job is stalled: "+prefix) {
					t.Errorf("verdict %+v", r.Verdict)
				}
				// Its ranks map no NCCL (a ring over pipes): the advice that
				// makes survivors fail loudly is a process-group timeout.
				if d := died[0].Decision; strings.Contains(d, "NCCL_") || !strings.Contains(d, "init_process_group(timeout=...)") {
					t.Errorf("the ranks use no NCCL; decision: %s", d)
				}
				for _, f := range findingsWith(r, "rank-missing") {
					t.Errorf("rank 2 is explained by its death: %s", f.Claim)
				}
			}
		})
	}
}
