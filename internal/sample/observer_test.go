package sample

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

// The observer runs inside the tree it watches (this test process is a
// child of its parent, the target): it is left out of the job, and the
// timeline says so.
func TestObserverInsideTheTreeIsLeftOut(t *testing.T) {
	livetest.Need(t)
	s, err := New(Config{PID: os.Getppid(), Duration: 300 * time.Millisecond, Interval: 100 * time.Millisecond, Tool: "test"})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for k := range tl.Procs {
		if k.PID == os.Getpid() {
			t.Errorf("the observer (pid %d) is part of the job", k.PID)
		}
	}
	if !strings.Contains(strings.Join(tl.Meta.Notes, " "), "observer is left out") {
		t.Errorf("notes %q", tl.Meta.Notes)
	}
}

// Pointing the sampler at itself is refused.
func TestObserverCannotBeTheTarget(t *testing.T) {
	if _, err := New(Config{PID: os.Getpid(), Tool: "test"}); err == nil || !strings.Contains(err.Error(), "gpufeed process itself") {
		t.Errorf("err %v", err)
	}
}
