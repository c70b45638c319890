package frozen

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// glooStuck is a stalled gloo job (a launcher, ranks 0-2 in futex waits)
// with the Python stacks the built-in reader read of the real job: rank 2
// deadlocked on a lock, ranks 0-1 in all_reduce.
func glooStuck(t *testing.T, edit func(string) string) *timeline.Timeline {
	t.Helper()
	dump, err := os.ReadFile("testdata/gloo-rank2-stuck.txt")
	if err != nil {
		t.Fatal(err)
	}
	b := newTL(31, 100*time.Millisecond)
	b.proc(13428, 1, "python3", []string{"/usr/bin/python3", "torch_ranks.py"}, nil)
	b.thread(13428, 13428, "python3", idle("wait4", "", "do_wait"))
	for i, pid := range []int{13430, 13431, 13432} {
		r := string(rune('0' + i))
		b.proc(pid, 13428, "python3", []string{"/usr/bin/python3", "torch_ranks.py"}, map[string]string{"RANK": r, "WORLD_SIZE": "3"})
		b.thread(pid, pid, "python3", idle("futex", "", "futex_do_wait"))
	}
	text := string(dump)
	if edit != nil {
		text = edit(text)
	}
	b.tl.Events = append(b.tl.Events, timeline.Event{Kind: timeline.EventPyStacks, PID: 13428, Text: text})
	return b.tl
}

func TestRankPositionsNameTheStuckRank(t *testing.T) {
	r := Analyze(glooStuck(t, nil), nil)
	f := one(t, r.Findings, "rank-positions")
	want := "rank 2 is the member the others wait for: rank 2 (pid 13432) is at rank_main (/tmp/tr/torch_ranks.py:41), outside any collective, " +
		"while ranks 0-1 wait in all_reduce (/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:1541), called from rank_main (/tmp/tr/torch_ranks.py:42)"
	if f.Claim != want || f.Severity != finding.Critical || f.Supports != finding.Stalled {
		t.Errorf("%s %s\n got %q\nwant %q", f.Severity, f.Supports, f.Claim, want)
	}
	if len(f.Evidence) != 3 || f.Evidence[2].What != "rank 2 (pid 13432), main thread, outside any collective" || f.Evidence[0].What != "rank 0 (pid 13430), main thread, waiting in all_reduce" {
		t.Errorf("%+v", f.Evidence)
	}
	v := Verdict(r)
	if v == nil || !strings.HasPrefix(v.Summary, "the job is stalled: rank 2 is the member the others wait for") || v.Confidence != confExplained {
		t.Errorf("the verdict must lead with the stuck rank: %+v", v)
	}
}

func TestRankPositionsMismatchedCollectives(t *testing.T) {
	tl := glooStuck(t, func(s string) string {
		// rank 2 in a barrier instead of its lock
		return strings.Replace(s, "Thread 13432 (idle): \"python3\"\n    rank_main (/tmp/tr/torch_ranks.py:41)",
			"Thread 13432 (idle): \"python3\"\n    barrier (/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:3145)\n    rank_main (/tmp/tr/torch_ranks.py:40)", 1)
	})
	f := one(t, Analyze(tl, nil).Findings, "rank-positions")
	if !strings.HasPrefix(f.Claim, "The ranks wait in different collectives, so none can complete: ranks 0-1 in all_reduce (") ||
		!strings.Contains(f.Claim, "; rank 2 in barrier (/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py:3145), called from rank_main (/tmp/tr/torch_ranks.py:40)") {
		t.Errorf("%q", f.Claim)
	}
}

// A job that progresses gets no positions: the stacks are then only
// information (the python-stacks findings).
func TestRankPositionsOnlyWhenStalled(t *testing.T) {
	tl := glooStuck(t, nil)
	b := &tlb{tl: tl, interval: 100 * time.Millisecond}
	b.thread(13430, 13430, "python3", b.busy(1, 0))
	for _, f := range Analyze(tl, nil).Findings {
		if f.ID == "rank-positions" {
			t.Errorf("a progressing job: %s", f.Claim)
		}
	}
}

// Threads the reader left out (their stacks changed while read) are said
// to be missing, not silently dropped.
func TestPythonStacksSaySkipped(t *testing.T) {
	tl := glooStuck(t, func(s string) string {
		return strings.Replace(s, "Read by gpufeed's CPython reader (process_vm_readv)\n", "Read by gpufeed's CPython reader (process_vm_readv)\nSkipped 2 threads (their stacks changed while read)\n", 1)
	})
	for _, f := range Analyze(tl, nil).Findings {
		if f.ID == "python-stacks" && strings.Contains(f.Subject, "13428") {
			if !strings.HasSuffix(f.Claim, "; 2 threads left out (their stacks changed while read)") || !strings.Contains(f.Evidence[0].Source, "gpufeed's CPython reader") {
				t.Errorf("%q %+v", f.Claim, f.Evidence)
			}
			return
		}
	}
	t.Error("no python-stacks finding for the launcher")
}
