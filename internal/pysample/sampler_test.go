package pysample

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// Sampling the known program for a second gives each thread's share as
// py-spy top would: the sleeping threads always in their one stack, the
// spinning thread running in spin and holding the GIL, and the user's
// lines with their source text.
func TestSamplerShares(t *testing.T) {
	livetest.Need(t)
	pys := interpreters(t)
	for _, name := range []string{"pyenv-3.8", "pyenv-3.12", "debian-python3"} {
		t.Run(name, func(t *testing.T) {
			python := pys[name]
			if python == "" {
				t.Skipf("%s is not installed on this machine", name)
			}
			k := startKnown(t, python, "--spin")
			time.Sleep(300 * time.Millisecond) // main reaches main_wait
			// the interpreter file's facts are read once per file: read them
			// before the window, so that it holds rounds, not set-up
			if _, err := Open(procfs.At("/proc", "/sys"), k.cmd.Process.Pid); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			tops := Sampler{FS: procfs.At("/proc", "/sys")}.Run(ctx, k.cmd.Process.Pid)
			if len(tops) != 1 || tops[0].PID != k.cmd.Process.Pid || tops[0].Rounds < 3 {
				t.Fatalf("%+v", tops)
			}
			top := tops[0]
			by := map[int]profile.PySampleThread{}
			for _, th := range top.Threads {
				by[th.TID] = th
			}
			in := func(fn string) func(profile.Frame) bool {
				return func(f profile.Frame) bool { return f.Function == fn && strings.HasSuffix(f.File, "known.py") }
			}
			nested := by[k.tids["nested"]]
			if s := nested.Share(in("middle")); s.Samples != nested.Samples || nested.Samples != top.Rounds || nested.GIL != 0 {
				t.Errorf("nested thread: %+v of %d rounds: %+v", s, top.Rounds, nested)
			}
			if len(nested.Lines) != 1 || nested.Lines[0].Function != "leaf" || nested.Lines[0].Source != "select.select([], [], [], 1000)  # @leaf-select" {
				t.Errorf("nested thread's lines: %+v", nested.Lines)
			}
			spin := by[k.tids["spin"]]
			if s := spin.Share(in("spin")); s.Samples != spin.Samples || spin.Active == 0 || spin.GIL < spin.Samples/2 {
				t.Errorf("spin thread: %+v", spin)
			}
			if fs := spin.FunctionShares(); len(fs) == 0 || fs[0].Total != spin.Samples {
				t.Errorf("function shares: %+v", fs)
			}
			main := by[k.cmd.Process.Pid]
			if s := main.Share(in("main_wait")); s.Samples != main.Samples || main.Active > main.Samples/5 {
				t.Errorf("main thread: %+v", main)
			}
			txt, err := profile.FormatPySamples(top)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := profile.ParsePySamples(txt); err != nil || len(back.Threads) != len(top.Threads) {
				t.Errorf("round trip: %v", err)
			}
		})
	}
}

// Opened is called once the Python processes present at the start are
// open, before the first round: a window that waits for it is sampled from
// its first tick. Every round after it is counted, none before.
func TestSamplerOpenedBeforeTheFirstRound(t *testing.T) {
	livetest.Need(t)
	python := interpreters(t)["debian-python3"]
	if python == "" {
		t.Skip("Debian's python3 is not installed on this machine")
	}
	k := startKnown(t, python, "--spin")
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var openedAt time.Time
	opened := make(chan struct{})
	s := Sampler{FS: procfs.At("/proc", "/sys"), Opened: func() { openedAt = time.Now(); close(opened) }}
	start := time.Now()
	done := make(chan []profile.PySamples, 1)
	go func() { done <- s.Run(ctx, k.cmd.Process.Pid) }()
	select {
	case <-opened:
	case <-time.After(30 * time.Second):
		t.Fatal("Opened not called within 30 s")
	}
	window := time.Now()
	time.Sleep(time.Second)
	cancel()
	tops := <-done
	if len(tops) != 1 || tops[0].PID != k.cmd.Process.Pid {
		t.Fatalf("%+v", tops)
	}
	// at 50 Hz within a 5 % CPU budget: rounds over the second after
	// Opened, paced; the opening itself (before Opened) is in none
	t.Logf("opened in %v; %d rounds in the second after", openedAt.Sub(start), tops[0].Rounds)
	if tops[0].Rounds < 10 || tops[0].Rounds > int(time.Since(window)/(20*time.Millisecond))+2 {
		t.Errorf("%d rounds in the %v after Opened, want 10 to 50 a second", tops[0].Rounds, time.Since(window))
	}
}
