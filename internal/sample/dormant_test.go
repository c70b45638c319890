package sample

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// TestDormantThreadThatRunsIsReadAtOnce: twenty threads asleep are dormant
// after a slow period, and their samples are carried from their last
// reading, not read; one of them then runs for 300 ms between two slow
// ticks. Its process's CPU outgrows what the threads read account for, so
// every thread is read on that tick: its run shows in the ticks it ran in,
// never lumped into one tick.
func TestDormantThreadThatRunsIsReadAtOnce(t *testing.T) {
	livetest.Need(t)
	tidFile := filepath.Join(t.TempDir(), "tid")
	py := exec.Command("python3", "-c", `import sys, threading, time
go = threading.Event()
def idle():
    threading.Event().wait()
def busy():
    open(sys.argv[1], "w").write("%d\n" % threading.get_native_id())
    go.wait()
    end = time.thread_time() + 0.3
    while time.thread_time() < end:
        pass
    threading.Event().wait()
for _ in range(20):
    threading.Thread(target=idle, daemon=True).start()
threading.Thread(target=busy, daemon=True).start()
time.sleep(1.6)
go.set()
time.sleep(30)`, tidFile)
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = py.Process.Kill(); _ = py.Wait() }()
	var tid int
	for i := 0; i < 100 && tid == 0; i++ {
		time.Sleep(20 * time.Millisecond)
		if b, err := os.ReadFile(tidFile); err == nil {
			tid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if tid == 0 {
		t.Fatal("the job did not start its threads")
	}
	s, tl := runSampler(t, Config{PID: py.Process.Pid, Interval: 100 * time.Millisecond, Duration: 3 * time.Second,
		SlowEvery: time.Second}, nil)
	if s.carried == 0 || tl.Meta.Observer.ThreadSamplesCarried != s.carried {
		t.Fatalf("no dormant thread's sample was carried (%d; observer %d): the 20 idle threads were read every tick",
			s.carried, tl.Meta.Observer.ThreadSamplesCarried)
	}
	var prev *timeline.ThreadSample
	var prevT int64
	var ran uint64
	for _, tk := range tl.Ticks {
		for i := range tk.Threads {
			th := &tk.Threads[i]
			if th.TID != tid {
				continue
			}
			if prev != nil {
				d, dt := th.RunNS-prev.RunNS, tk.T-prevT
				ran += d
				// At most the tick's own length, the slack for a dormant
				// thread's run (30 ms) and the clock ticks' rounding (20 ms).
				if int64(d) > dt+60e6 {
					t.Errorf("at %v the busy thread shows %v of CPU in a tick of %v: a run lumped into one tick",
						time.Duration(tk.T), time.Duration(d), time.Duration(dt))
				}
			}
			prev, prevT = th, tk.T
		}
	}
	if ran < 250e6 {
		t.Errorf("the busy thread's 300 ms run shows as %v", time.Duration(ran))
	}
}

// TestIdleThreadsCarriedFromTheirSecondReading: 200 threads that never run
// are dormant from their second reading, not after a slow period: their
// samples are carried on every tick but the first two and the last (the
// first second read all 200 every tick, ten readings each, most of a
// 10 s window's cost on a 1,000-thread job). Where each waits is still
// read, on the slow tick after the first, and a thread that then runs is
// read at once (TestDormantThreadThatRunsIsReadAtOnce).
func TestIdleThreadsCarriedFromTheirSecondReading(t *testing.T) {
	livetest.Need(t)
	py := exec.Command("python3", "-c", `import threading, time
for _ in range(200):
    threading.Thread(target=threading.Event().wait, daemon=True).start()
print("up", flush=True)
time.sleep(60)`)
	out, err := py.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = py.Process.Kill(); _ = py.Wait() }()
	if _, err := out.Read(make([]byte, 3)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the interpreter settles
	s, tl := runSampler(t, Config{PID: py.Process.Pid, Interval: 100 * time.Millisecond, Duration: 3 * time.Second,
		SlowEvery: time.Second}, nil)
	ticks := len(tl.Ticks)
	// every tick but the first two and the last, for the 200 idle threads,
	// less a tenth for ticks on which the interpreter's own thread ran
	want := int(0.9 * float64((ticks-3)*200))
	if s.carried < want {
		t.Errorf("%d thread-samples carried in %d ticks; want at least %d (200 idle threads carried from their second reading)", s.carried, ticks, want)
	}
	// where they wait is read all the same
	last := tl.Ticks[ticks-1]
	waits := 0
	for _, th := range last.Threads {
		if th.TID != py.Process.Pid && th.Blocked != nil && th.Blocked.Syscall == "futex" {
			waits++
		}
	}
	if waits < 200 {
		t.Errorf("%d of the 200 idle threads have their futex wait read at the last tick", waits)
	}
	// and before the end, on a slow tick (a live view or the agent has
	// no last tick)
	early := false
	for _, tk := range tl.Ticks[:ticks-1] {
		n := 0
		for _, th := range tk.Threads {
			if th.Blocked != nil && th.Blocked.Syscall == "futex" {
				n++
			}
		}
		early = early || n >= 200
	}
	if !early {
		t.Error("no tick before the last had the idle threads' waits read")
	}
}
