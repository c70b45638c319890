package judge

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The launch thread waits on the DataLoader's pipe; the scheduler's
// events say who woke it: mostly the first worker's thread, some the idle
// task, a few a thread outside the job, as many two threads of one process
// outside it (counted as one waker: its process). The evidence names them
// with their roles and shares; the verdict and the findings' IDs are those of the
// same window without the events.
func TestWakersOfTheLaunchThreadInTheEvidence(t *testing.T) {
	s := pipeline(26, 'R', 2)
	tl := s.timeline()
	a := derive.New(tl)
	v0, fs0 := judgeVF(tl, a)

	tl = s.timeline()
	tl.Meta.Wakers = &timeline.Wakers{Edges: []timeline.WakeEdge{
		{Wakee: 100, Waker: 200, WakerPID: 200, WakerComm: "python3", Count: 800},
		{Wakee: 100, Waker: 0, WakerPID: 0, WakerComm: "swapper/1", Count: 150},
		{Wakee: 100, Waker: 4242, WakerPID: 4240, WakerComm: "irq/42-nvidia", Count: 40},
		{Wakee: 100, Waker: 5003, WakerPID: 5000, WakerComm: "server", Count: 20},
		{Wakee: 100, Waker: 5001, WakerPID: 5000, WakerComm: "server", Count: 25},
		{Wakee: 100, Waker: 201, WakerPID: 201, WakerComm: "python3", Count: 10},
		{Wakee: 200, Waker: 100, WakerPID: 100, WakerComm: "python3", Count: 500},
	}}
	a = derive.New(tl)
	v, fs := judgeVF(tl, a)
	if v.Class != v0.Class || !slices.Equal(v.Because, v0.Because) || len(fs) != len(fs0) {
		t.Errorf("with the wakers: verdict %s because %v (%d findings); without: %s because %v (%d)", v.Class, v.Because, len(fs), v0.Class, v0.Because, len(fs0))
	}
	f := findingByID(fs, "input-pipeline-busy")
	if f == nil {
		t.Fatalf("no input-pipeline-busy finding: %+v", fs)
	}
	got := evidenceText(f)
	// The two threads of process 5000, outside the job, are one waker (45),
	// ahead of the interrupt thread (40).
	want := "who woke the launch thread python3 (pid 100, main thread) (1045 wake-ups, 209 a second): " +
		"python3 (pid 200, main thread) of worker pid 200 800 times (77%); " +
		"the idle task (an interrupt on an idle CPU) 150 times (14%); " +
		"server (pid 5000, 2 of its threads, outside the watched job) 45 times (4%); 2 other wakers 50 times"
	if !strings.Contains(got, want) {
		t.Errorf("evidence:\n%s\nwant:\n%s", got, want)
	}
	if f0 := findingByID(fs0, "input-pipeline-busy"); f0 == nil || strings.Contains(evidenceText(f0), "who woke") {
		t.Errorf("without the events: %+v", f0)
	}
}

// Counted in spells (the kernel's counters as the source), the wake-ups
// are a sample: the evidence says for how long of the
// window they were counted, and the rate is over that time, not the window.
func TestSampledWakersSayHowLongTheyWereCounted(t *testing.T) {
	s := pipeline(26, 'R', 2)
	tl := s.timeline()
	window := tl.Ticks[len(tl.Ticks)-1].T - tl.Ticks[0].T
	tl.Meta.Wakers = &timeline.Wakers{SampledNS: window / 10, Edges: []timeline.WakeEdge{
		{Wakee: 100, Waker: 200, WakerPID: 200, WakerComm: "python3", Count: 90},
		{Wakee: 100, Waker: 0, WakerPID: 0, WakerComm: "swapper/1", Count: 10},
	}}
	a := derive.New(tl)
	_, fs := judgeVF(tl, a)
	f := findingByID(fs, "input-pipeline-busy")
	if f == nil {
		t.Fatalf("no input-pipeline-busy finding: %+v", fs)
	}
	var ev *finding.Evidence
	for i, e := range f.Evidence {
		if strings.HasPrefix(e.What, "who woke the launch thread") {
			ev = &f.Evidence[i]
		}
	}
	if ev == nil {
		t.Fatalf("no wakers' evidence: %s", evidenceText(f))
	}
	secs := float64(window/10) / 1e9
	wantWhat := fmt.Sprintf("who woke the launch thread python3 (pid 100, main thread) (100 wake-ups in the %s they were counted, %.0f a second)",
		durationOf(timeline.Duration(window/10)).Round(10*time.Millisecond), 100/secs)
	if ev.What != wantWhat {
		t.Errorf("what: %q\nwant %q", ev.What, wantWhat)
	}
	if !strings.HasPrefix(ev.Window, durationOf(timeline.Duration(window/10)).Round(10*time.Millisecond).String()+" of the window (") || !strings.HasSuffix(ev.Window, "counted in spells") ||
		!strings.HasSuffix(ev.Source, "while its program was attached") {
		t.Errorf("window %q, source %q: want the time counted and the window named", ev.Window, ev.Source)
	}
	if !strings.Contains(ev.Text, "90 times (90%)") {
		t.Errorf("text %q: want the sample's shares", ev.Text)
	}
}
