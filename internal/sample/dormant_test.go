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
// never lumped into one tick. The process's CPU comes from its CPU clock
// (nanoseconds) and, where that cannot be read, from its stat (clock ticks):
// both are run.
func TestDormantThreadThatRunsIsReadAtOnce(t *testing.T) {
	livetest.Need(t)
	for _, clock := range []bool{true, false} {
		name := "clock"
		if !clock {
			name = "stat"
		}
		t.Run(name, func(t *testing.T) { dormantThreadRuns(t, clock) })
	}
}

func dormantThreadRuns(t *testing.T, clock bool) {
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
		SlowEvery: time.Second}, func(s *Sampler) { s.ownPIDs = s.ownPIDs && clock })
	if p := s.procs[py.Process.Pid]; p == nil || p.haveBase && p.baseExact != clock || (p.pstat == nil) != clock {
		t.Errorf("the process's CPU was not read from its %s", map[bool]string{true: "CPU clock", false: "stat"}[clock])
	}
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

// TestThreadsWakingNowAndThenAreRead: eight threads that each wake every
// 400 ms from a sleep (a rank's main thread waiting in each collective, a
// poll loop), beside twenty idle ones, over a 3 s window read every 100 ms
// with a 1 s slow period. A waking thread is read every tick, its runs seen
// as they come: it is never still for a slow period. Made dormant at its
// second reading when it had not run between its first two (the rule of
// c84b21c, taken back), it was carried for the whole window: a wake costs
// it microseconds of CPU, so its process's CPU never outgrew the slack
// that makes every thread be read. That carried four torch ranks' main
// threads as waiting in the collective they were first read in: a
// straggler sleeping 150 ms a round read as waiting on a peer.
func TestThreadsWakingNowAndThenAreRead(t *testing.T) {
	livetest.Need(t)
	tidFile := filepath.Join(t.TempDir(), "tids")
	py := exec.Command("python3", "-c", `import sys, threading, time
tids = []
lock = threading.Lock()
def waker(off):
    with lock:
        tids.append(threading.get_native_id())
    time.sleep(off)
    while True:
        time.sleep(0.4)
for _ in range(20):
    threading.Thread(target=threading.Event().wait, daemon=True).start()
for i in range(8):
    threading.Thread(target=waker, args=(i * 0.05,), daemon=True).start()
while len(tids) < 8:
    time.sleep(0.01)
open(sys.argv[1] + ".new", "w").write(" ".join(map(str, tids)))
import os; os.rename(sys.argv[1] + ".new", sys.argv[1])
time.sleep(60)`, tidFile)
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = py.Process.Kill(); _ = py.Wait() }()
	var tids []int
	for i := 0; i < 200 && tids == nil; i++ {
		time.Sleep(20 * time.Millisecond)
		if b, err := os.ReadFile(tidFile); err == nil {
			for _, f := range strings.Fields(string(b)) {
				n, _ := strconv.Atoi(f)
				tids = append(tids, n)
			}
		}
	}
	if len(tids) != 8 {
		t.Fatalf("the job did not start its waking threads: %v", tids)
	}
	time.Sleep(500 * time.Millisecond) // each has begun its 400 ms cycle
	_, tl := runSampler(t, Config{PID: py.Process.Pid, Interval: 100 * time.Millisecond, Duration: 3 * time.Second,
		SlowEvery: time.Second}, nil)
	if len(tl.Ticks) < 20 {
		t.Fatalf("%d ticks in 3 s", len(tl.Ticks))
	}
	inner := tl.Ticks[:len(tl.Ticks)-1] // the last tick reads every thread whatever the rule
	for _, tid := range tids {
		moves, seen := 0, 0
		var prev *timeline.ThreadSample
		for _, tk := range inner {
			for i := range tk.Threads {
				th := &tk.Threads[i]
				if th.TID != tid {
					continue
				}
				seen++
				if prev != nil && th.RunNS != prev.RunNS {
					moves++
				}
				prev = th
			}
		}
		// about 7 wakes in the window; a few may fall in one tick
		if seen < 20 || moves < 4 {
			t.Errorf("thread %d, waking every 400 ms: %d samples, its CPU time changed in %d ticks before the last (want at least 4): carried, not read",
				tid, seen, moves)
		}
	}
}
