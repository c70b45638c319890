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
