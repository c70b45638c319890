package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// window builds a one-thread window starting at start with n ticks of
// 100 ms, and a kernel log line read at its end.
func window(start time.Time, n int, runNS uint64) *timeline.Timeline {
	tl := &timeline.Timeline{
		Meta: timeline.Meta{SchemaVersion: timeline.SchemaVersion, Started: start, Interval: timeline.Duration(100 * time.Millisecond),
			Duration: timeline.Duration(time.Duration(n) * 100 * time.Millisecond), Target: timeline.Target{PID: 42, StartTime: 7}, Ended: "duration"},
		Procs:   map[timeline.ProcKey]*timeline.ProcInfo{{PID: 42, StartTime: 7}: {Key: timeline.ProcKey{PID: 42, StartTime: 7}, Comm: "python3", LastSeen: int64(n-1) * 1e8}},
		Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{{TID: 42, StartTime: 7}: {Key: timeline.ThreadKey{TID: 42, StartTime: 7}, PID: 42, Comm: "python3", LastSeen: int64(n-1) * 1e8}},
	}
	for i := 0; i < n; i++ {
		tl.Ticks = append(tl.Ticks, timeline.Tick{T: int64(i) * 1e8, Threads: []timeline.ThreadSample{{TID: 42, PID: 42, State: 'S', RunNS: runNS}}})
	}
	tl.Events = append(tl.Events, timeline.Event{T: -5e9, Kind: timeline.EventKernelLog, Text: "Out of memory: Killed process 43 (python3)"})
	return tl
}

// TestMergeJoinsWindowsOnOneClock: two windows joined are one timeline on
// the first window's clock, time moving on, the kernel log line both read
// kept once, and the job's facts those of the latest window.
func TestMergeJoinsWindowsOnOneClock(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var chunks []packed
	for i, tl := range []*timeline.Timeline{window(t0, 5, 1000), window(t0.Add(600*time.Millisecond), 5, 2000)} {
		p, err := pack(tl)
		if err != nil {
			t.Fatalf("window %d: %v", i, err)
		}
		chunks = append(chunks, p)
	}
	tl, _, err := merge(chunks)
	if err != nil {
		t.Fatal(err)
	}
	if len(tl.Ticks) != 10 {
		t.Fatalf("%d ticks, want 10", len(tl.Ticks))
	}
	for i := 1; i < len(tl.Ticks); i++ {
		if tl.Ticks[i].T <= tl.Ticks[i-1].T {
			t.Fatalf("tick %d at %d after %d: time goes back", i, tl.Ticks[i].T, tl.Ticks[i-1].T)
		}
	}
	if got := tl.Ticks[5].T; got != 600e6 {
		t.Errorf("second window's first tick at %d ns, want 600 ms on the first window's clock", got)
	}
	if got := tl.Ticks[9].Threads[0].RunNS; got != 2000 {
		t.Errorf("last sample RunNS %d, want the second window's 2000", got)
	}
	kernel := 0
	for _, e := range tl.Events {
		if e.Kind == timeline.EventKernelLog {
			kernel++
		}
	}
	if kernel != 1 {
		t.Errorf("%d kernel log events, want the line both windows read once", kernel)
	}
	if p := tl.Procs[timeline.ProcKey{PID: 42, StartTime: 7}]; p == nil || p.LastSeen != 600e6+4e8 {
		t.Errorf("process facts %+v, want the latest window's, on the joined clock", p)
	}
	if !strings.Contains(strings.Join(tl.Meta.Notes, "\n"), "2 windows") {
		t.Errorf("notes %q do not say the windows were joined", tl.Meta.Notes)
	}
	if _, _, err := merge(nil); err != errEmptyRing {
		t.Errorf("empty ring: %v", err)
	}
}

func TestDCGMBusID(t *testing.T) {
	for in, want := range map[string]string{"0000:81:00.0": "00000000:81:00.0", "0000:3b:00.0": "00000000:3B:00.0", "": "", "odd": "ODD"} {
		if got := dcgmBusID(in); got != want {
			t.Errorf("dcgmBusID(%q) = %q, want %q", in, got, want)
		}
	}
}
