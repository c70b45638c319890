//go:build amd64 || arm64

package syscalls

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// A real PyTorch DataLoader with two workers (Debian's python3-torch under
// /usr/bin/python3, which scripts/test.sh installs): its table has the
// shape of a multi-worker job: the trainer waiting on the workers' queue
// in poll and reading the batches, futex waits in the pin/queue threads,
// the workers' own calls under their pids.
func TestDataLoaderTable(t *testing.T) {
	livetest.Need(t)
	need(t)
	r, err := testjob.Start(t.Context(), testjob.TorchDataLoader, nil, "--storage", "numpy", "--workers", "2",
		"--items", "200000", "--step", "0.005")
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	m, err := r.Await(t.Context(), "workers", 90*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	workers := m.Ints("workers")
	if len(workers) != 2 {
		t.Fatalf("workers %v", workers)
	}
	s, err := Summarize(t.Context(), append([]int{r.PID}, workers...), 1500*time.Millisecond, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"futex", "poll", "read"} {
		if s.Total(name).Calls == 0 {
			t.Errorf("no %s in the table: %+v", name, s.Totals)
		}
	}
	main, ok := s.Thread(r.PID)
	if !ok || main.Stat("poll").Calls == 0 || main.Stat("read").Calls == 0 {
		t.Errorf("the trainer's thread polls and reads the workers' queue: %+v", main)
	}
	for _, w := range workers {
		if !slices.ContainsFunc(s.Threads, func(th profile.ThreadSyscalls) bool { return th.PID == w && th.Calls > 0 }) {
			t.Errorf("worker %d has no syscalls in the table", w)
		}
	}
}
