package render

import (
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/finding"
)

func TestWaitLinePicksTheProgramsOwnLine(t *testing.T) {
	for _, c := range []struct{ stack, want string }{
		{"one (/job/dl.py:8) <- run (/usr/lib/python3.11/threading.py:982)", "at one (dl.py:8)"},
		{"_wait_for_tstate_lock (/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py:1139) <- join (/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py:1119) <- <module> (/job/dl.py:21)",
			"at <module> (dl.py:21), in _wait_for_tstate_lock (threading.py:1139)"},
		{"get (/usr/lib/python3/dist-packages/torch/x.py:3) <- wait (/usr/lib/python3.11/threading.py:320)", "at get (x.py:3)"},
		{"wait (/usr/lib/python3.11/threading.py:320)", "in wait (threading.py:320)"},
		{"no Python frame (native code or idle)", "no Python frame (native code or idle)"},
	} {
		if got := waitLine(c.stack); got != c.want {
			t.Errorf("%q: %q, want %q", c.stack, got, c.want)
		}
	}
}

func TestWaitingStacksBounded(t *testing.T) {
	f := finding.Finding{ID: "python-stacks", Subject: "pid 1 (python3)"}
	for range 20 {
		f.Evidence = append(f.Evidence, finding.Evidence{What: "thread 7 (python3), idle", Text: "one (/job/dl.py:8)"})
	}
	lines := waitingStacks([]finding.Finding{f}, 80)
	if len(lines) != 1+maxStackRows+1 || !strings.HasPrefix(lines[1], "  thread 7 (python3), idle: at one (dl.py:8)") {
		t.Errorf("%q", lines)
	}
}
