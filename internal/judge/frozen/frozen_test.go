package frozen

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func byID(fs []finding.Finding, id string) []finding.Finding {
	var out []finding.Finding
	for _, f := range fs {
		if f.ID == id {
			out = append(out, f)
		}
	}
	return out
}

func one(t *testing.T, fs []finding.Finding, id string) finding.Finding {
	t.Helper()
	got := byID(fs, id)
	if len(got) != 1 {
		var ids []string
		for _, f := range fs {
			ids = append(ids, f.ID)
		}
		t.Fatalf("want one %s finding, got %d (findings: %v)", id, len(got), ids)
	}
	return got[0]
}

func none(t *testing.T, fs []finding.Finding, id string) {
	t.Helper()
	if got := byID(fs, id); len(got) != 0 {
		t.Errorf("want no %s finding, got %q", id, got[0].Claim)
	}
}

func evidence(f finding.Finding, what string) (finding.Evidence, bool) {
	for _, e := range f.Evidence {
		if strings.Contains(e.What, what) {
			return e, true
		}
	}
	return finding.Evidence{}, false
}

// oomJob is three ranks in a ring; rank 2 was OOM-killed 3 s into the
// window, ranks 0-1 wait in read on a pipe.
func oomJob(t *testing.T) *timeline.Timeline {
	b := newTL(101, 100*time.Millisecond)
	b.proc(100, 1, "python3", []string{"python3", "launch.py"}, nil)
	b.thread(100, 100, "python3", idle("wait4", "", "do_wait"))
	b.quietProc(100)
	for r, pid := range []int{201, 202} {
		env := map[string]string{"RANK": string(rune('0' + r)), "LOCAL_RANK": string(rune('0' + r)), "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "3"}
		rp := b.proc(pid, 100, "python3", []string{"python3", "train.py"}, env)
		rp.Collectives = ncclMapped()
		b.thread(pid, pid, "python3", idle("read", "pipe:[77"+string(rune('0'+r))+"]", "pipe_read"))
		b.thread(pid, pid+1000, "pt_watchdog", idle("futex", "", "futex_wait_queue"))
		b.quietProc(pid)
	}
	victim := b.proc(203, 100, "python3", []string{"python3", "train.py"}, map[string]string{"RANK": "2", "LOCAL_RANK": "2", "WORLD_SIZE": "3", "LOCAL_WORLD_SIZE": "3"})
	victim.Exited = true
	victim.LastSeen = 2900 * int64(time.Millisecond)
	b.thread(203, 203, "python3", func(i int) timeline.ThreadSample {
		if i >= 30 {
			return timeline.ThreadSample{}
		}
		return timeline.ThreadSample{State: 'R', RunNS: uint64(i) * 1e8}
	})
	b.procSamples(203, func(i int) (timeline.ProcSample, bool) {
		return timeline.ProcSample{IO: &timeline.IO{RChar: 5000}}, i < 30
	})
	// the kernel's report, 3.0 s into the window
	at := int64(3 * time.Second)
	for _, line := range []string{
		"python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
		"memory: usage 88080384kB, limit 88080384kB, failcnt 59",
		"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/slurm/job7,task_memcg=/slurm/job7/step0,task=python3,pid=203,uid=0",
		"Memory cgroup out of memory: Killed process 203 (python3) total-vm:118274816kB, anon-rss:84213504kB, file-rss:6616kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0",
	} {
		b.tl.Events = append(b.tl.Events, timeline.Event{T: at, Kind: timeline.EventKernelLog, Text: line})
	}
	b.gpuUtil(0, func(int) float64 { return 0 })
	return b.tl
}

func TestStalledDeadRankNamed(t *testing.T) {
	r := Analyze(oomJob(t), nil)
	if !r.Progress.Stalled() {
		t.Fatalf("not stalled: %+v", r.Progress)
	}
	fs := r.Findings
	if fs[0].ID != "job-stalled" || fs[0].Severity != finding.Critical || fs[0].Supports != finding.Stalled {
		t.Errorf("first finding %+v", fs[0])
	}
	d := one(t, fs, "member-died")
	want := "rank 2 (pid 203) was killed by the OOM killer at 14:22:03 holding 80.3 GiB; ranks 0-1 wait in read on pipe"
	if d.Claim != want {
		t.Errorf("claim\n got %q\nwant %q", d.Claim, want)
	}
	if e, ok := evidence(d, "memory cgroup limit"); !ok || e.Value != 84*1024 || e.Unit != "MiB" {
		t.Errorf("limit evidence %+v", e)
	}
	if !strings.Contains(d.Decision, "memory cgroup's limit (84.0 GiB)") {
		t.Errorf("decision %q", d.Decision)
	}
	bt := one(t, fs, "blocked-threads")
	if !strings.Contains(bt.Claim, "2 read on pipe") || !strings.Contains(bt.Claim, "2 futex") || !strings.Contains(bt.Claim, "1 wait4") {
		t.Errorf("blocked table claim %q", bt.Claim)
	}
	none(t, fs, "rank-missing") // the missing rank is explained by its death
	one(t, fs, "nccl-async-error-handling-unset")
}

func TestNotStalledWhenWorking(t *testing.T) {
	b := newTL(51, 100*time.Millisecond)
	b.proc(10, 1, "python3", []string{"python3", "train.py"}, nil)
	b.thread(10, 10, "python3", b.busy(0.9, 0))
	b.quietProc(10)
	r := Analyze(b.tl, nil)
	if r.Progress.Stalled() || r.Progress.CPUCores < 0.85 {
		t.Errorf("%+v", r.Progress)
	}
	none(t, r.Findings, "job-stalled")
	none(t, r.Findings, "blocked-threads")
}

func TestNotJudgedOnShortWindow(t *testing.T) {
	b := newTL(10, 100*time.Millisecond) // 0.9 s
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", idle("read", "pipe:[1]", "pipe_read"))
	if p := MeasureProgress(b.tl); p.Judged || p.Stalled() {
		t.Errorf("a 0.9 s window must not be judged: %+v", p)
	}
}

func TestIOAndGPUKeepItAlive(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", idle("read", "/data/x", ""))
	b.procSamples(10, func(i int) (timeline.ProcSample, bool) {
		return timeline.ProcSample{IO: &timeline.IO{RChar: uint64(i) * 100000}}, true
	})
	if p := MeasureProgress(b.tl); p.Stalled() {
		t.Errorf("1 MB/s of reads is progress: %+v", p)
	}
	b = newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", idle("ioctl", "", ""))
	b.gpuUtil(0, func(i int) float64 { return float64(i % 60) })
	if p := MeasureProgress(b.tl); p.Stalled() {
		t.Errorf("a GPU at up to 59 %% is working: %+v", p)
	}
}

func TestGPUSpinIsStalled(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, map[string]string{"RANK": "0"})
	b.thread(10, 10, "python3", idle("futex", "", "futex_wait_queue"))
	b.gpuUtil(0, func(int) float64 { return 100 })
	r := Analyze(b.tl, nil)
	if !r.Progress.Stalled() || !r.Progress.GPUSpinning() {
		t.Fatalf("%+v", r.Progress)
	}
	f := one(t, r.Findings, "job-stalled")
	if !strings.Contains(f.Claim, "spinning on a peer") {
		t.Errorf("claim %q", f.Claim)
	}
}

func TestDStateAndExitedThreads(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", func(i int) timeline.ThreadSample {
		if i < 5 {
			return timeline.ThreadSample{State: 'S'}
		}
		return timeline.ThreadSample{State: 'D', Blocked: &timeline.Blocked{Wchan: "rpc_wait_bit_killable", Syscall: "read", On: "/nfs/data/shard-7"}}
	})
	b.thread(10, 11, "worker", func(i int) timeline.ThreadSample {
		if i > 10 {
			return timeline.ThreadSample{}
		}
		return timeline.ThreadSample{State: 'D'}
	})
	threads := BlockedThreads(newView(b.tl))
	if len(threads) != 2 || threads[0].InD != 2500*time.Millisecond || threads[1].MaxD != time.Second || !threads[1].Exited || threads[1].InD != 0 {
		t.Fatalf("%+v", threads)
	}
	r := Analyze(b.tl, nil)
	f := one(t, r.Findings, "uninterruptible-sleep")
	if !strings.Contains(f.Claim, "2 threads") || !strings.Contains(f.Evidence[0].Text, "still there at the end") || !strings.Contains(f.Evidence[0].Text, "rpc_wait_bit_killable") {
		t.Errorf("%+v", f)
	}
}

// TestDSleepsOneAtATimeAreNoStuckThread: a thread importing modules from a
// cold page cache is in D at every sample, each time in another read, and
// is scheduled in between them (schedstat's run count grows): many short
// sleeps, not one of 3 s. The same thread not scheduled in between is one
// sleep, and is reported.
func TestDSleepsOneAtATimeAreNoStuckThread(t *testing.T) {
	for _, c := range []struct {
		name    string
		perTick uint64
		stuck   bool
	}{{"scheduled in between", 3, false}, {"never scheduled in", 0, true}} {
		t.Run(c.name, func(t *testing.T) {
			b := newTL(31, 100*time.Millisecond)
			b.proc(10, 1, "python3", nil, nil)
			b.thread(10, 10, "python3", func(i int) timeline.ThreadSample {
				return timeline.ThreadSample{State: 'D', Slices: 100 + uint64(i)*c.perTick, RunNS: 5e6 + uint64(i)*c.perTick*1e5,
					Blocked: &timeline.Blocked{Wchan: "folio_wait_bit_common", Syscall: "read", On: "/usr/lib/python3/dist-packages/torch/x" + strconv.Itoa(i) + ".pyc"}}
			})
			threads := BlockedThreads(newView(b.tl))
			if got := len(byID(Analyze(b.tl, nil).Findings, "uninterruptible-sleep")) > 0; got != c.stuck || (threads[0].MaxD >= time.Second) != c.stuck {
				t.Errorf("reported %v, longest D run %v; want reported %v", got, threads[0].MaxD, c.stuck)
			}
		})
	}
	// Stuck 2 s, scheduled in once, then in D again to the end: the
	// evidence names the longest sleep (the claim's) and the last one.
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 10, "python3", func(i int) timeline.ThreadSample {
		n := uint64(0)
		if i > 20 {
			n = 1
		}
		return timeline.ThreadSample{State: 'D', Slices: 100 + n, RunNS: 5e6 + n*1e5, Blocked: &timeline.Blocked{Wchan: "rpc_wait_bit_killable", Syscall: "read", On: "/nfs/x"}}
	})
	f := one(t, Analyze(b.tl, nil).Findings, "uninterruptible-sleep")
	if !strings.Contains(f.Claim, "up to 2.0 s") || !strings.HasPrefix(f.Evidence[0].Text, "in D for 2.0 s, and in another sleep in D for 0.9 s still there at the end") {
		t.Errorf("claim %q, evidence %q", f.Claim, f.Evidence[0].Text)
	}
}

func TestKilledBeforeWindowInJobCgroup(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	p := b.proc(10, 1, "python3", nil, map[string]string{"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"})
	p.MemCgroup = &timeline.MemCgroup{Version: 2, Path: "/kubepods/pod1/c1", LimitBytes: u64(8 << 30), UsageBytes: u64(7 << 30), LimitAt: "/kubepods/pod1"}
	b.thread(10, 10, "python3", idle("recvmsg", "socket:[5]", ""))
	b.tl.Events = append(b.tl.Events,
		timeline.Event{T: -int64(time.Hour), Kind: timeline.EventKernelLog, Text: "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/kubepods/pod1,task_memcg=/kubepods/pod1/c1,task=python3,pid=11,uid=0"},
		timeline.Event{T: -int64(time.Hour), Kind: timeline.EventKernelLog, Text: "Memory cgroup out of memory: Killed process 11 (python3) total-vm:1kB, anon-rss:7000000kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0"},
		timeline.Event{T: int64(time.Second), Kind: timeline.EventKernelLog, Text: "Out of memory: Killed process 999 (chrome) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0"},
	)
	r := Analyze(b.tl, nil)
	d := one(t, r.Findings, "member-died")
	// Never sampled: tied to the job by its cgroup, to local rank 1 by
	// elimination (LOCAL_WORLD_SIZE=2 with local rank 0 alive).
	if !strings.HasPrefix(d.Claim, "local rank 1 (pid 11) was killed by the OOM killer at 13:22:00") || !strings.HasSuffix(d.Claim, "; local rank 1 by elimination (likely)") {
		t.Errorf("claim %q", d.Claim)
	}
	if e, _ := evidence(d, "how pid 11 was matched to local rank 1"); !strings.Contains(e.Text, "LOCAL_WORLD_SIZE=2 with local rank 0 alive leaves local rank 1 missing") ||
		!strings.Contains(e.Text, "it was in the ranks' memory cgroup (/kubepods/pod1/c1)") {
		t.Errorf("%+v", e)
	}
	none(t, r.Findings, "rank-missing")
	h := one(t, r.Findings, "host-oom-kill")
	if !strings.Contains(h.Evidence[0].Text, "chrome") {
		t.Errorf("%+v", h)
	}
}

func TestCrashAndPlainExit(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	for _, pid := range []int{20, 21, 22} {
		env := map[string]string(nil)
		if pid == 21 {
			env = map[string]string{"RANK": "1"}
		}
		p := b.proc(pid, 1, "python3", nil, env)
		p.Exited = true
		b.thread(pid, pid, "python3", func(i int) timeline.ThreadSample {
			if i > 5 {
				return timeline.ThreadSample{}
			}
			return timeline.ThreadSample{State: 'R'}
		})
	}
	b.thread(20, 25, "worker", func(int) timeline.ThreadSample { return timeline.ThreadSample{State: 'S'} })
	b.tl.Events = append(b.tl.Events, timeline.Event{T: int64(600 * time.Millisecond), Kind: timeline.EventKernelLog,
		Text: "worker\x1b[2J[25]: segfault at 0 ip 00007f97d5985ad8 sp 00007ffe377b4ff8 error 4 in libc.so.6[167ad8,7f97d5844000+156000] likely on CPU 1 (core 1, socket 0)"})
	r := Analyze(b.tl, nil)
	ds := byID(r.Findings, "member-died")
	if len(ds) != 2 { // pid 22, an unranked helper that exited, is no death
		t.Fatalf("%d deaths", len(ds))
	}
	if ds[0].Claim != "pid 20 (python3) crashed (segfault in libc.so.6) at 14:22:00" || ds[0].Severity != finding.Critical {
		t.Errorf("crash claim %q", ds[0].Claim)
	}
	if e, _ := evidence(ds[0], "kernel line"); strings.ContainsRune(e.Text, 0x1b) {
		t.Errorf("control characters must be escaped: %q", e.Text)
	}
	if !strings.Contains(ds[1].Claim, "rank 1 (pid 21) exited during the window") || ds[1].Severity != finding.Warning {
		t.Errorf("exit claim %q", ds[1].Claim)
	}
}

func TestXidAndHungTask(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, nil)
	b.thread(10, 12, "pt_main_thread", idle("ioctl", "", ""))
	for _, line := range []string{
		"NVRM: Xid (PCI:0000:cb:00): 109, pid=12, name=pt_main_thread, Ch 00000008, errorString CTX SWITCH TIMEOUT, Info 0x58005",
		"NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception",
		"INFO: task pt_main_thread:12 blocked for more than 120 seconds.",
		"NVRM: Xid (PCI:0000:06:00): 79, GPU has fallen off the bus.",
	} {
		b.tl.Events = append(b.tl.Events, timeline.Event{T: 0, Kind: timeline.EventKernelLog, Text: line})
	}
	r := Analyze(b.tl, nil)
	x := one(t, r.Findings, "gpu-xid")
	if !strings.Contains(x.Claim, "Xid 13 ×1, Xid 109 ×1") {
		t.Errorf("%q", x.Claim)
	}
	if f := one(t, r.Findings, "gpu-fell-off-bus"); f.Severity != finding.Critical {
		t.Errorf("%+v", f)
	}
	h := one(t, r.Findings, "hung-task")
	if !strings.Contains(h.Claim, "pid 10 (python3) tid 12 (pt_main_thread)") || !strings.Contains(h.Claim, "120.0 s") {
		t.Errorf("%q", h.Claim)
	}
}

// Gone before gpufeed attached, reaped: only the kernel log has the kill.
// The ranks' size, the ranks alive and the command tie it to local rank 2.
func TestMissingRankNamedFromKill(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	for r, pid := range []int{201, 202} {
		b.proc(pid, 100, "python3", []string{"python3", "train.py"}, map[string]string{"RANK": string(rune('0' + r)), "LOCAL_RANK": string(rune('0' + r)), "LOCAL_WORLD_SIZE": "3"})
		b.thread(pid, pid, "python3", idle("read", "pipe:[1]", "pipe_read"))
	}
	b.tl.Events = append(b.tl.Events,
		timeline.Event{T: -int64(time.Minute), Kind: timeline.EventKernelLog, Text: "Memory cgroup out of memory: Killed process 203 (python3) total-vm:78064kB, anon-rss:65280kB, file-rss:6616kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0"},
		timeline.Event{T: -int64(time.Minute), Kind: timeline.EventKernelLog, Text: "Out of memory: Killed process 999 (chrome) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0"},
	)
	r := Analyze(b.tl, nil)
	none(t, r.Findings, "rank-missing")
	d := one(t, r.Findings, "member-died")
	want := "local rank 2 (pid 203) was killed by the OOM killer at 14:21:00 holding 70.2 MiB; ranks 0-1 wait in read on pipe; local rank 2 by elimination (likely)"
	if d.Claim != want {
		t.Errorf("claim\n got %q\nwant %q", d.Claim, want)
	}
	e, _ := evidence(d, "how pid 203 was matched to local rank 2")
	wantHow := "likely: LOCAL_WORLD_SIZE=3 with local ranks 0-1 alive leaves local rank 2 missing; pid 203 is gone (reaped): only the kernel log shows it, and it names no rank; " +
		"the kernel killed a python3 process, the ranks' command; pids increase with the rank (0: 201, 1: 202): the launcher started them in order, and pid 203 comes after local rank 1's"
	if e.Text != wantHow {
		t.Errorf("how\n got %q\nwant %q", e.Text, wantHow)
	}
	if v := Verdict(r); v == nil || v.Confidence != confExplained || !strings.HasPrefix(v.Summary, "the job is stalled: local rank 2 (pid 203) was killed") {
		t.Errorf("%+v", v)
	}
}

// Another job's process of the same command killed during the window (a
// shared host short of memory) cannot be the rank missing since the window
// began: it does not stand in the way of the kill before it, and is
// reported as the host's. Both kills come before the window: ambiguous.
func TestMissingRankBesideALaterKill(t *testing.T) {
	b := launcherOfTwoRanks()
	kill := func(at time.Duration, pid string) timeline.Event {
		return timeline.Event{T: int64(at), Kind: timeline.EventKernelLog,
			Text: "Memory cgroup out of memory: Killed process " + pid + " (python3) total-vm:78064kB, anon-rss:65280kB, file-rss:6616kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0"}
	}
	b.tl.Events = append(b.tl.Events, kill(-4*time.Second, "203"), kill(2*time.Second, "305"))
	r := Analyze(b.tl, nil)
	d := one(t, r.Findings, "member-died")
	if !strings.HasPrefix(d.Claim, "rank 2 (pid 203) was killed by the OOM killer") || !strings.HasSuffix(d.Claim, "; rank 2 by elimination (likely)") {
		t.Errorf("%q", d.Claim)
	}
	e, _ := evidence(d, "how pid 203 was matched to rank 2")
	if !strings.Contains(e.Text, "the kernel log's other python3 kill (pid 305) came after the window began, of a process the job's tree never showed") {
		t.Errorf("how %q", e.Text)
	}
	if h := one(t, r.Findings, "host-oom-kill"); !strings.Contains(h.Claim, "killed 1 process outside the job during the window") {
		t.Errorf("%q", h.Claim)
	}
	// A kill within a second of the window's first reading may be of a
	// process born and killed between two listings of the tree: it still
	// counts, and two candidates name neither.
	b.tl.Events = b.tl.Events[:len(b.tl.Events)-1]
	b.tl.Events = append(b.tl.Events, kill(500*time.Millisecond, "305"))
	none(t, Analyze(b.tl, nil).Findings, "member-died")
}

// Two kills of the ranks' command for one missing rank: neither is named.
func TestMissingRankAmbiguousKills(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	for r, pid := range []int{201, 202} {
		b.proc(pid, 100, "python3", nil, map[string]string{"RANK": string(rune('0' + r)), "LOCAL_RANK": string(rune('0' + r)), "LOCAL_WORLD_SIZE": "3"})
		b.thread(pid, pid, "python3", idle("read", "pipe:[1]", "pipe_read"))
	}
	for _, pid := range []string{"203", "204"} {
		b.tl.Events = append(b.tl.Events, timeline.Event{T: -int64(time.Minute), Kind: timeline.EventKernelLog,
			Text: "Out of memory: Killed process " + pid + " (python3) total-vm:1kB, anon-rss:1kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0"})
	}
	r := Analyze(b.tl, nil)
	none(t, r.Findings, "member-died")
	f := one(t, r.Findings, "rank-missing")
	if !strings.Contains(f.Claim, "pid 203 (python3) killed") || !strings.Contains(f.Claim, "pid 204 (python3) killed") {
		t.Errorf("%q", f.Claim)
	}
}

// launcherOfTwoRanks is a launcher waiting in wait4 and ranks 0 and 1 of
// three (RANK, LOCAL_RANK, WORLD_SIZE) waiting in read on a pipe.
func launcherOfTwoRanks() *tlb {
	b := newTL(31, 100*time.Millisecond)
	b.proc(100, 1, "python3", []string{"python3", "launch.py"}, nil)
	b.thread(100, 100, "python3", idle("wait4", "", "do_wait"))
	for r, pid := range []int{201, 202} {
		p := b.proc(pid, 100, "python3", []string{"python3", "train.py"}, map[string]string{"RANK": string(rune('0' + r)), "LOCAL_RANK": string(rune('0' + r)), "WORLD_SIZE": "3"})
		p.Key.StartTime = uint64(5000 + r)
		b.thread(pid, pid, "python3", idle("read", "pipe:[1]", "pipe_read"))
	}
	return b
}

// The launcher waits for its ranks in order: rank 2, OOM-killed before
// gpufeed attached, is its zombie child. RANK/WORLD_SIZE only.
func TestZombieRankSure(t *testing.T) {
	b := launcherOfTwoRanks()
	z := b.proc(203, 100, "python3", nil, nil) // a zombie: no command line, no environment
	z.Key.StartTime, z.Exited, z.Role = 5012, true, "child"
	b.tl.Events = append(b.tl.Events, timeline.Event{T: -int64(time.Minute), Kind: timeline.EventKernelLog,
		Text: "Memory cgroup out of memory: Killed process 203 (python3) total-vm:78064kB, anon-rss:65280kB, file-rss:6616kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0"})
	r := Analyze(b.tl, nil)
	d := one(t, r.Findings, "member-died")
	if !strings.HasPrefix(d.Claim, "rank 2 (pid 203) was killed by the OOM killer") || !strings.HasSuffix(d.Claim, "; rank 2 by elimination (sure)") {
		t.Errorf("%q", d.Claim)
	}
	e, _ := evidence(d, "how pid 203 was matched to rank 2")
	for _, want := range []string{"sure: WORLD_SIZE=3 with ranks 0-1 alive leaves rank 2 missing", "pid 203 is a zombie child of the ranks' launcher (pid 100), like ranks 0-1",
		"pid 203 comes after rank 1's", "it started 110 ms after rank 1"} {
		if !strings.Contains(e.Text, want) {
			t.Errorf("how %q lacks %q", e.Text, want)
		}
	}
	// Rank 2 of 8 with no node size: ranks 3-7 may run elsewhere; pid order
	// still puts the zombie next to rank 1, but only likely.
	for _, p := range b.tl.Procs {
		if p.Env != nil {
			p.Env["WORLD_SIZE"] = "8"
		}
	}
	d = one(t, Analyze(b.tl, nil).Findings, "member-died")
	if !strings.HasSuffix(d.Claim, "; rank 2 by elimination (likely)") {
		t.Errorf("%q", d.Claim)
	}
	if e, _ := evidence(d, "how pid 203"); !strings.Contains(e.Text, "leaves ranks 2-7 unaccounted for here") {
		t.Errorf("%q", e.Text)
	}
	// Round robin over the nodes (srun --distribution=cyclic): the node
	// runs ranks 0, 2, 4 ..., local ranks 0, 1, 2: the zombie is rank 4.
	for _, p := range b.tl.Procs {
		if p.Env["RANK"] == "1" {
			p.Env["RANK"] = "2"
		}
	}
	if d := one(t, Analyze(b.tl, nil).Findings, "member-died"); !strings.HasPrefix(d.Claim, "rank 4 (pid 203) was killed") {
		t.Errorf("%q", d.Claim)
	}
	// Without LOCAL_RANK there is no telling which of ranks 2-7 it was.
	for _, p := range b.tl.Procs {
		delete(p.Env, "LOCAL_RANK")
	}
	if d := one(t, Analyze(b.tl, nil).Findings, "member-died"); !strings.HasPrefix(d.Claim, "pid 203 (python3) was killed") {
		t.Errorf("%q", d.Claim)
	}
}

// TestReapedChildIOIsNoProgress: reaping a child folds its I/O counters into
// the parent's /proc/PID/io; that jump must not count as the job moving.
func TestReapedChildIOIsNoProgress(t *testing.T) {
	tl := oomJob(t)
	for i := range tl.Ticks {
		for j := range tl.Ticks[i].Procs {
			ps := &tl.Ticks[i].Procs[j]
			if ps.PID == 100 && i >= 30 { // the launcher reaped rank 2 after its last sample at tick 29
				ps.IO = &timeline.IO{RChar: 5000 + 1740578, WChar: 700}
			}
		}
	}
	r := Analyze(tl, nil)
	if !r.Progress.Stalled() || r.Progress.IOBytesPerSec != 0 {
		t.Errorf("the reaped child's I/O counted as progress: %+v", r.Progress)
	}
	// the same jump with no child exiting around it is I/O
	for i := range tl.Ticks {
		for j := range tl.Ticks[i].Procs {
			ps := &tl.Ticks[i].Procs[j]
			if ps.PID == 100 && i >= 60 {
				ps.IO = &timeline.IO{RChar: 5000 + 2*1740578, WChar: 700}
			}
		}
	}
	if p := Analyze(tl, nil).Progress; p.Stalled() {
		t.Errorf("1.7 MB read by the launcher itself is progress: %+v", p)
	}
}

// The advice that makes survivors fail loudly next time names the backend
// the ranks were seen to use: NCCL's async error handling where they map
// NCCL, the process group's timeout where they map gloo and no NCCL (the
// distributed-backend finding says the NCCL settings do not apply there).
func TestFailLoudlyAdviceFollowsTheBackend(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mapped *timeline.Collectives
		want   []string
		reject string
	}{
		{"nccl", ncclMapped(), []string{"TORCH_NCCL_ASYNC_ERROR_HANDLING"}, "init_process_group"},
		{"gloo", &timeline.Collectives{Mapped: []string{"/usr/lib/x86_64-linux-gnu/libgloo.so.0.5.0"}},
			[]string{"init_process_group(timeout=...)", "30 minutes by default for gloo"}, "NCCL_"},
		{"no-library", &timeline.Collectives{}, []string{"init_process_group(timeout=...)"}, "NCCL_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tl := oomJob(t)
			for _, p := range tl.Procs {
				if p.Key.PID == 201 || p.Key.PID == 202 {
					p.Collectives = tc.mapped
				}
			}
			fs := Analyze(tl, nil).Findings
			for _, id := range []string{"job-stalled", "member-died"} {
				d := one(t, fs, id).Decision
				for _, w := range tc.want {
					if !strings.Contains(d, w) {
						t.Errorf("%s decision lacks %q: %s", id, w, d)
					}
				}
				if strings.Contains(d, tc.reject) {
					t.Errorf("%s decision says %q: %s", id, tc.reject, d)
				}
			}
		})
	}
}

// Another job's python3 OOM-killed on the same host (a pid never seen in
// this job) does not hide the launcher's zombie child: a dead child seen
// in the job's tree outranks a kill known only from the kernel log.
func TestZombieRankBesideAForeignKill(t *testing.T) {
	b := launcherOfTwoRanks()
	z := b.proc(203, 100, "python3", nil, nil)
	z.Key.StartTime, z.Exited, z.Role = 5012, true, "child"
	for _, pid := range []string{"203", "250"} {
		b.tl.Events = append(b.tl.Events, timeline.Event{T: -int64(time.Minute), Kind: timeline.EventKernelLog,
			Text: "Memory cgroup out of memory: Killed process " + pid + " (python3) total-vm:78064kB, anon-rss:65280kB, file-rss:6616kB, shmem-rss:0kB, UID:0 pgtables:200kB oom_score_adj:0"})
	}
	d := one(t, Analyze(b.tl, nil).Findings, "member-died")
	if !strings.HasPrefix(d.Claim, "rank 2 (pid 203) was killed by the OOM killer") || !strings.HasSuffix(d.Claim, "; rank 2 by elimination (sure)") {
		t.Errorf("%q", d.Claim)
	}
	if e, _ := evidence(d, "how pid 203 was matched to rank 2"); !strings.Contains(e.Text, "the kernel log's other python3 kill (pid 250) is of a process never seen in the job") {
		t.Errorf("how %q", e.Text)
	}
}

// A kill the kernel logged before a helper started names the helper's pid
// when the pid was reused (pid_max 32768 on a busy host): the helper's
// exit is no member's death. The same kill after it started is one.
func TestKillBeforeThePidsProcessStartedIsNotItsDeath(t *testing.T) {
	for _, c := range []struct {
		name   string
		killAt time.Duration
		died   bool
	}{{"killed before it started", 500 * time.Millisecond, false}, {"killed while it ran", 2500 * time.Millisecond, true}} {
		t.Run(c.name, func(t *testing.T) {
			b := newTL(41, 100*time.Millisecond)
			b.tl.Meta.UptimeNS = int64(1000 * time.Second)
			b.proc(10, 1, "python3", []string{"python3", "serve.py"}, nil)
			b.thread(10, 10, "python3", b.busy(0.5, 0))
			b.quietProc(10)
			// the helper started 1 s into the window (uptime 1001 s) and
			// exited at 3 s
			h := b.proc(300, 10, "sh", []string{"sh", "-c", "true"}, nil)
			delete(b.tl.Procs, h.Key)
			h.Key.StartTime = 100100
			b.tl.Procs[h.Key] = h
			h.Exited, h.LastSeen = true, int64(3*time.Second)
			b.procSamples(300, func(i int) (timeline.ProcSample, bool) { return timeline.ProcSample{}, i >= 10 && i < 30 })
			for _, line := range []string{
				"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/other,task_memcg=/other,task=python3,pid=300,uid=0",
				"Memory cgroup out of memory: Killed process 300 (python3) total-vm:75672kB, anon-rss:65280kB, file-rss:6636kB, shmem-rss:0kB, UID:0 pgtables:192kB oom_score_adj:0",
			} {
				b.tl.Events = append(b.tl.Events, timeline.Event{T: int64(c.killAt), Kind: timeline.EventKernelLog, Text: line})
			}
			r := Analyze(b.tl, nil)
			if died := len(byID(r.Findings, "member-died")) > 0; died != c.died {
				t.Errorf("member-died %v, want %v: %v", died, c.died, r.Findings)
			}
		})
	}
}

// TestStallDecisionFitsTheWait: the decision of a stall follows the wait
// found. One process, its helper thread reading a pipe nobody in the job
// writes while the training thread waits for the lock it holds (the
// stalled demo): the pipe, that no thread writes it, how to find its
// holders, and the lock, with no NCCL advice. The same with a writer of
// the job blocked writing the pipe: the writer named. Threads waiting only
// on each other's futexes: a deadlock. A rank of a distributed job (or a
// member that died): the NCCL advice. (Every stall got the NCCL advice.)
func TestStallDecisionFitsTheWait(t *testing.T) {
	single := func(writer bool) *timeline.Timeline {
		b := newTL(101, 100*time.Millisecond)
		b.proc(100, 1, "python3", []string{"python3", "train.py"}, nil)
		b.thread(100, 100, "python3", idle("futex", "", "futex_wait_queue"))
		b.thread(100, 101, "loader", idle("read", "pipe:[4242]", "pipe_read"))
		if writer {
			b.proc(200, 100, "python3", []string{"python3", "-c", "worker"}, nil)
			b.thread(200, 200, "python3", idle("write", "pipe:[4242]", "pipe_write"))
			b.quietProc(200)
		}
		b.quietProc(100)
		b.gpuUtil(0, func(int) float64 { return 0 })
		return b.tl
	}
	d := one(t, Analyze(single(false), nil).Findings, "job-stalled").Decision
	for _, want := range []string{"tid 101 (loader)", "waits to read pipe:[4242]", "no thread of the job was seen writing it", `grep 'pipe:\[4242\]'`, "1 other thread of pid 100 waits on a lock or condition (futex)"} {
		if !strings.Contains(d, want) {
			t.Errorf("pipe with no writer: the decision lacks %q: %s", want, d)
		}
	}
	if strings.Contains(d, "NCCL") || strings.Contains(d, "collective") {
		t.Errorf("pipe with no writer: NCCL advice for a job with no NCCL: %s", d)
	}
	d = one(t, Analyze(single(true), nil).Findings, "job-stalled").Decision
	if !strings.Contains(d, "its writer, pid 200") {
		t.Errorf("pipe with a blocked writer: the decision does not name it: %s", d)
	}

	b := newTL(101, 100*time.Millisecond)
	b.proc(100, 1, "python3", []string{"python3", "serve.py"}, nil)
	b.thread(100, 100, "python3", idle("futex", "", "futex_wait_queue"))
	b.thread(100, 101, "worker", idle("futex", "", "futex_wait_queue"))
	b.quietProc(100)
	b.gpuUtil(0, func(int) float64 { return 0 })
	d = one(t, Analyze(b.tl, nil).Findings, "job-stalled").Decision
	if !strings.Contains(d, "a deadlock") || strings.Contains(d, "NCCL") {
		t.Errorf("threads waiting on each other's locks: %s", d)
	}

	d = one(t, Analyze(oomJob(t), nil).Findings, "job-stalled").Decision
	if !strings.Contains(d, "TORCH_NCCL_ASYNC_ERROR_HANDLING") || !strings.Contains(d, "dead rank") {
		t.Errorf("a dead rank of an NCCL job: %s", d)
	}
}
