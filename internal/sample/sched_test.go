package sample

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/schedbpf"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The same job sampled at once from the kernel's counters (the task
// iterator) and from /proc: the spinning thread's CPU and run-queue wait
// shares agree within 5 points, its slices within 5 %, the sleeper's stay
// at zero, and each run says which source it used.
func TestLiveSchedSourcesAgree(t *testing.T) {
	livetest.Need(t)
	if err := schedbpf.Check(""); err != nil {
		t.Skipf("scheduler events not allowed here: %v", err)
	}
	pid, tids := startLoad(t, "compete:1")
	var wg sync.WaitGroup
	tls := map[string]*timeline.Timeline{}
	var mu sync.Mutex
	// The /proc run starts once the counters' run has its programs loaded
	// (its Release): on a loaded host the load took nearly all of a 3 s
	// window, and the runs overlapped 92 ms.
	loaded := make(chan struct{})
	for _, mode := range []string{SchedBPF, SchedProc} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cfg := Config{PID: pid, Duration: 3 * time.Second, Interval: 100 * time.Millisecond, Tool: "test", Sched: mode}
			if mode == SchedBPF {
				cfg.Release = func() error { close(loaded); return nil }
			} else {
				select {
				case <-loaded:
				case <-time.After(30 * time.Second):
					t.Error("the counters' run did not start in 30 s")
					return
				}
			}
			s, err := New(cfg)
			if err != nil {
				t.Error(err)
				return
			}
			tl, err := s.Run(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			tls[mode] = tl
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if o := tls[SchedBPF].Meta.Observer; o == nil || o.Sched != timeline.SchedBPF {
		t.Fatalf("bpf run: observer %+v", o)
	}
	if o := tls[SchedProc].Meta.Observer; o == nil || o.Sched != timeline.SchedProc || o.SchedNotBPF != "" {
		t.Fatalf("proc run: observer %+v", o)
	}
	// Over the time both runs sampled (loading the programs delays the
	// first run's start): each run's ticks nearest that span's ends.
	span := func(tl *timeline.Timeline) (time.Time, time.Time) {
		return tl.Meta.Started.Add(time.Duration(tl.Ticks[0].T)), tl.Meta.Started.Add(time.Duration(tl.Ticks[len(tl.Ticks)-1].T))
	}
	b0, b1 := span(tls[SchedBPF])
	p0, p1 := span(tls[SchedProc])
	from, to := b0, b1
	if p0.After(from) {
		from = p0
	}
	if p1.Before(to) {
		to = p1
	}
	if to.Sub(from) < time.Second {
		t.Fatalf("the two runs overlap only %v", to.Sub(from))
	}
	growth := func(tl *timeline.Timeline, tid int) (run, wait, slices uint64, secs float64) {
		var first, last *timeline.ThreadSample
		var t0, t1 time.Time
		for i := range tl.Ticks {
			at := tl.Meta.Started.Add(time.Duration(tl.Ticks[i].T))
			for j, s := range tl.Ticks[i].Threads {
				if s.TID != tid {
					continue
				}
				if first == nil && !at.Before(from.Add(-50*time.Millisecond)) {
					first, t0 = &tl.Ticks[i].Threads[j], at
				}
				if !at.After(to.Add(50 * time.Millisecond)) {
					last, t1 = &tl.Ticks[i].Threads[j], at
				}
			}
		}
		if first == nil || last == nil {
			t.Fatalf("thread %d not sampled", tid)
		}
		return last.RunNS - first.RunNS, last.WaitNS - first.WaitNS, last.Slices - first.Slices, t1.Sub(t0).Seconds()
	}
	for _, tid := range append(tids["target"], tids["other"]...) {
		br, bw, bs, bsec := growth(tls[SchedBPF], tid)
		pr, pw, ps, psec := growth(tls[SchedProc], tid)
		bshare := func(v uint64) float64 { return float64(v) / 1e9 / bsec * 100 }
		pshare := func(v uint64) float64 { return float64(v) / 1e9 / psec * 100 }
		t.Logf("thread %d over %.2f s and %.2f s: bpf CPU %.1f%% wait %.1f%% slices %d; proc CPU %.1f%% wait %.1f%% slices %d",
			tid, bsec, psec, bshare(br), bshare(bw), bs, pshare(pr), pshare(pw), ps)
		if d := bshare(br) - pshare(pr); d < -5 || d > 5 {
			t.Errorf("thread %d: CPU %.1f%% from the counters, %.1f%% from /proc", tid, bshare(br), pshare(pr))
		}
		if d := bshare(bw) - pshare(pw); d < -5 || d > 5 {
			t.Errorf("thread %d: run-queue wait %.1f%% from the counters, %.1f%% from /proc", tid, bshare(bw), pshare(pw))
		}
		brate, prate := float64(bs)/bsec, float64(ps)/psec
		if d := brate - prate; d < -0.1*prate-5 || d > 0.1*prate+5 {
			t.Errorf("thread %d: %.0f slices/s from the counters, %.0f from /proc (%d and %d slices)", tid, brate, prate, bs, ps)
		}
	}
	// Both runs end with the same thread states and switch counts.
	for _, mode := range []string{SchedBPF, SchedProc} {
		a := derive.New(tls[mode])
		th := threadByTID(t, a, tids["target"][0])
		last, _ := th.Last()
		if last == nil || last.State != 'R' || last.Switches == nil || last.Switches.Involuntary == 0 {
			t.Errorf("%s: target's last sample %+v: want R with involuntary switches", mode, last)
		}
		if th.Invol < 1 {
			t.Errorf("%s: target involuntary switches %.1f/s", mode, th.Invol)
		}
	}
}

// The helper's sampling mode: sample the process named by
// GPUFEED_TEST_SCHED_TARGET for half a second with --sched
// GPUFEED_TEST_SCHED_MODE and print the observer (or the error) as JSON.
func runSchedProbe() {
	pid := os.Getppid()
	s, err := New(Config{PID: pid, Duration: 500 * time.Millisecond, Interval: 100 * time.Millisecond, Tool: "test",
		Sched: os.Getenv("GPUFEED_TEST_SCHED_MODE")})
	out := map[string]any{}
	if err == nil {
		var tl *timeline.Timeline
		if tl, err = s.Run(context.Background()); err == nil {
			out["observer"] = tl.Meta.Observer
			out["ticks"] = len(tl.Ticks)
		}
	}
	if err != nil {
		out["error"] = err.Error()
		var se *SchedError
		var u *bpfcap.Unavailable
		out["sched_error"] = errors.As(err, &se) && errors.As(err, &u)
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

// Run as nobody, --sched auto samples from /proc and says why not from
// the scheduler's events; --sched bpf refuses, naming what is missing.
func TestSchedUnprivilegedFallsBack(t *testing.T) {
	livetest.Need(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to run the sampler as another user")
	}
	dir, err := os.MkdirTemp("", "schedfallback")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755)
	exe, _ := os.Executable()
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(mode string) map[string]any {
		// sh (as nobody) is the target; the probe, its child, samples it.
		c := exec.Command("/bin/sh", "-c", bin+"; sleep 0.1")
		c.Env = append(os.Environ(), schedProbe+"=1", "GPUFEED_TEST_SCHED_MODE="+mode)
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		c.Dir = dir
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%s: %v: %s", mode, err, out)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%s: %v: %s", mode, err, out)
		}
		return got
	}
	auto := run(SchedAuto)
	o, _ := auto["observer"].(map[string]any)
	t.Logf("auto: %v", auto)
	if o == nil || o["sched"] != "proc" || o["sched_not_bpf"] != "loading eBPF programs needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, or root)" {
		t.Errorf("auto as nobody: %v; want /proc, with the missing capabilities named", auto)
	}
	if n, _ := auto["ticks"].(float64); n < 4 {
		t.Errorf("auto as nobody: %v ticks", auto["ticks"])
	}
	bpf := run(SchedBPF)
	t.Logf("bpf: %v", bpf)
	if bpf["sched_error"] != true || bpf["observer"] != nil {
		t.Errorf("bpf as nobody: %v; want the run refused as not available", bpf)
	}
}

// A reading of the kernel's counters that fails mid-window hands the rest
// of the window to /proc: the report says so, and the series go on
// unbroken (the spinners' CPU and wait still add up to a whole core, with
// no jump where the source changed: the counters are /proc's own).
func TestLiveSchedFailureFallsBackToProc(t *testing.T) {
	livetest.Need(t)
	if err := schedbpf.Check(""); err != nil {
		t.Skipf("scheduler events not allowed here: %v", err)
	}
	pid, tids := startLoad(t, "compete:1")
	s, err := New(Config{PID: pid, Duration: 1500 * time.Millisecond, Interval: 100 * time.Millisecond, Tool: "test", Sched: SchedBPF,
		schedFailAt: 700 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	o := tl.Meta.Observer
	if o == nil || o.Sched != timeline.SchedProc || !strings.Contains(o.SchedNotBPF, "failed mid-window: a failure the test asked for") {
		t.Fatalf("observer %+v: want /proc after the reading failed, saying so", o)
	}
	a := derive.New(tl)
	for _, tid := range append(tids["target"], tids["other"]...) {
		th := threadByTID(t, a, tid)
		// Every interval's CPU and wait: none empty or doubled where the
		// source changed.
		for i := 1; i < len(tl.Ticks); i++ {
			var prev, cur *timeline.ThreadSample
			for j := range tl.Ticks[i-1].Threads {
				if tl.Ticks[i-1].Threads[j].TID == tid {
					prev = &tl.Ticks[i-1].Threads[j]
				}
			}
			for j := range tl.Ticks[i].Threads {
				if tl.Ticks[i].Threads[j].TID == tid {
					cur = &tl.Ticks[i].Threads[j]
				}
			}
			if prev == nil || cur == nil {
				continue
			}
			dt := float64(tl.Ticks[i].T - tl.Ticks[i-1].T)
			share := float64(cur.RunNS-prev.RunNS+cur.WaitNS-prev.WaitNS) / dt
			if cur.RunNS < prev.RunNS || share > 1.6 {
				t.Errorf("spinner %d: interval %d: CPU+wait %.2f of the interval (run %d -> %d)", tid, i, share, prev.RunNS, cur.RunNS)
			}
		}
		if th.CPU.Mean+th.Wait.Mean < 70 {
			t.Errorf("spinner %d: CPU %.1f%% + wait %.1f%%, want ~100%%", tid, th.CPU.Mean, th.Wait.Mean)
		}
	}
}

// With the kernel's counters a thread that exits is gone from the next
// reading, whatever the thread count says: a thread that exits as another
// starts (the count unchanged, so /proc's listing is not redone until the
// slow tier) ends at its exit, not at the next listing, and its process
// stays.
func TestLiveCountersSeeAThreadExitAtOnce(t *testing.T) {
	livetest.Need(t)
	if err := schedbpf.Check(""); err != nil {
		t.Skipf("scheduler events not allowed here: %v", err)
	}
	// The leaver spins from the window's first tick until 300 ms after.
	gate := filepath.Join(t.TempDir(), "go")
	pid, tids := startLoad(t, "leaver:"+gate)
	var once sync.Once
	s, err := New(Config{PID: pid, Duration: 2 * time.Second, Interval: 100 * time.Millisecond, SlowEvery: 10 * time.Second,
		DiscoverEvery: 10 * time.Second, Tool: "test", Sched: SchedBPF,
		Progress: func(elapsed, window time.Duration, procs, threads int) {
			once.Do(func() { os.WriteFile(gate, nil, 0o644) })
		}})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if o := tl.Meta.Observer; o == nil || o.Sched != timeline.SchedBPF {
		t.Fatalf("observer %+v", o)
	}
	leaver := tids["leaver"][0]
	var last, exitAt int64 = -1, -1
	for _, tk := range tl.Ticks {
		for _, th := range tk.Threads {
			if th.TID == leaver {
				last = tk.T
			}
		}
	}
	for _, e := range tl.Events {
		if e.Kind == timeline.EventThreadExit && e.TID == leaver {
			exitAt = e.T
		}
	}
	end := tl.Ticks[len(tl.Ticks)-1].T
	t.Logf("leaver %d: last sampled at %v, exit read at %v, window end %v", leaver, time.Duration(last), time.Duration(exitAt), time.Duration(end))
	if exitAt < 0 || exitAt >= end || last >= exitAt {
		t.Errorf("leaver %d: exit read at %v (last sample %v), want it read before the window's last tick (%v)",
			leaver, time.Duration(exitAt), time.Duration(last), time.Duration(end))
	}
	if first := tl.Ticks[0].T; exitAt > first+int64(time.Second) {
		t.Errorf("leaver %d: exit read at %v; it spun 300 ms from the first tick (%v)", leaver, time.Duration(exitAt), time.Duration(first))
	}
}

// Where the threads wait, read in the kernel with the counters, is what
// /proc says: the same job sampled at once reading the waits in the kernel
// and from /proc (syscall, wchan and the descriptor's target) ends with
// the same wait for every asleep thread, the spinning thread has none, and
// each run says where it read them. The threads' stat facts read in the
// kernel when first seen are stat's too: the same threads, names and start
// times; and a thread renamed by another while it sleeps, its stat never
// opened, ends with its new name.
func TestLiveKernelWaitsAreProcs(t *testing.T) {
	livetest.Need(t)
	if err := schedbpf.Check(""); err != nil {
		t.Skipf("BPF not allowed here: %v", err)
	}
	pid, tids, in := livetest.StartWaitsJob(t)
	go func() {
		time.Sleep(1500 * time.Millisecond)
		in.Write([]byte("r"))
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	tls := map[bool]*timeline.Timeline{}
	for _, fromProc := range []bool{false, true} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := New(Config{PID: pid, Duration: 2500 * time.Millisecond, Interval: 100 * time.Millisecond, Tool: "test",
				Sched: SchedBPF, waitsFromProc: fromProc})
			if err != nil {
				t.Error(err)
				return
			}
			tl, err := s.Run(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			tls[fromProc] = tl
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if o := tls[false].Meta.Observer; o.Waits != timeline.SchedBPF || o.WaitsNotBPF != "" {
		t.Errorf("kernel run: waits %q (%q)", o.Waits, o.WaitsNotBPF)
	}
	if o := tls[true].Meta.Observer; o.Waits != timeline.SchedProc || o.WaitsNotBPF == "" {
		t.Errorf("/proc run: waits %q (%q)", o.Waits, o.WaitsNotBPF)
	}
	last := func(tl *timeline.Timeline, tid int) *timeline.Blocked {
		for i := len(tl.Ticks) - 1; i >= 0; i-- {
			for _, s := range tl.Ticks[i].Threads {
				if s.TID == tid {
					return s.Blocked
				}
			}
		}
		t.Fatalf("thread %d not sampled", tid)
		return nil
	}
	want := map[string]string{"MainThread": "read", "lockwait": "futex", "piperead": "read", "nap": "clock_nanosleep", "sel": "pselect6"}
	for name, call := range want {
		k, p := last(tls[false], tids[name]), last(tls[true], tids[name])
		t.Logf("%s: kernel %+v, /proc %+v", name, k, p)
		if k == nil || p == nil || *k != *p {
			t.Errorf("%s: kernel %+v, /proc %+v", name, k, p)
			continue
		}
		if k.Syscall != call && !(name == "sel" && k.Syscall == "select") || k.Wchan == "" {
			t.Errorf("%s waits in %+v, want %s", name, k, call)
		}
		if timed := name == "nap" || name == "sel"; k.Timed != timed {
			t.Errorf("%s: timed %v, want %v", name, k.Timed, timed)
		}
	}
	if b := last(tls[false], tids["spin"]); b != nil {
		t.Errorf("the spinning thread waits in %+v", b)
	}
	infos := func(tl *timeline.Timeline) map[timeline.ThreadKey]string {
		m := map[timeline.ThreadKey]string{}
		for k, th := range tl.Threads {
			m[k] = th.Comm
		}
		return m
	}
	k, p := infos(tls[false]), infos(tls[true])
	if len(k) != 6 || !maps.Equal(k, p) {
		t.Errorf("threads: kernel %v, /proc %v", k, p)
	}
	for key, comm := range k {
		if key.TID == tids["lockwait"] && comm != "renamed" {
			t.Errorf("the thread renamed while it slept ends as %q", comm)
		}
	}
}

// With the counters, the wake-up program is attached on the first tick and
// every third slow period after, each time for 300 ms at the defaults: a
// 3.5 s window counts wake-ups for about 600 ms, in two spells (its graph
// says how long), not for a tick every second.
func TestLiveWakersSampledInSpells(t *testing.T) {
	livetest.Need(t)
	if err := schedbpf.Check(""); err != nil {
		t.Skipf("BPF not allowed here: %v", err)
	}
	pid, _ := startLoad(t, "spin-sleep")
	s, err := New(Config{PID: pid, Duration: 3500 * time.Millisecond, Interval: 100 * time.Millisecond, Tool: "test", Sched: SchedBPF})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if tl.Meta.Wakers == nil {
		t.Fatal("no waker graph")
	}
	if got := time.Duration(tl.Meta.Wakers.SampledNS); got < 500*time.Millisecond || got > 900*time.Millisecond {
		t.Errorf("wake-ups counted for %v of the window, want about 600 ms", got)
	}
}
