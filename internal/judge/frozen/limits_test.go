package frozen

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/safetext"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func TestNCCLSettings(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	// ranks 0-1 use the old name; rank 2 turned handling off; the launcher has no rank
	for r, pid := range []int{10, 11} {
		b.proc(pid, 1, "python3", nil, map[string]string{"RANK": string(rune('0' + r)), "NCCL_ASYNC_ERROR_HANDLING": "1",
			"TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_NCCL_TRACE_BUFFER_SIZE": "0", "NCCL_TIMEOUT": "1800"}).Collectives = ncclMapped()
	}
	b.proc(12, 1, "python3", nil, map[string]string{"RANK": "2", "TORCH_NCCL_ASYNC_ERROR_HANDLING": "0", "TORCH_NCCL_ENABLE_MONITORING": "0",
		"TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_NCCL_TRACE_BUFFER_SIZE": "2000"})
	// rank 2 maps no NCCL library but runs PyTorch's NCCL watchdog: NCCL linked in statically
	b.tl.Threads[timeline.ThreadKey{TID: 1201, StartTime: 1201}] = &timeline.ThreadInfo{Key: timeline.ThreadKey{TID: 1201, StartTime: 1201}, PID: 12, Comm: "pt_nccl_watchdg"}
	b.proc(1, 0, "torchrun", nil, map[string]string{"NCCL_ASYNC_ERROR_HANDLING": "1"})
	fs := ncclFindings(newView(b.tl), false)
	old := one(t, fs, "nccl-async-error-handling-old-name")
	if !strings.HasSuffix(old.Claim, "(ranks 0-1)") || old.Severity != finding.Warning || old.Subject != "ranks 0-1 (pid 10,11)" {
		t.Errorf("%+v", old)
	}
	if e, _ := evidence(old, "NCCL_ASYNC_ERROR_HANDLING"); e.Text != "1" || e.Source != "/proc/PID/environ (allowlisted)" {
		t.Errorf("%+v", e)
	}
	off := one(t, fs, "nccl-async-error-handling-off")
	if !strings.HasSuffix(off.Claim, "(rank 2)") {
		t.Errorf("%q", off.Claim)
	}
	if f := one(t, fs, "nccl-dump-without-buffer"); !strings.Contains(f.Claim, "will be empty") {
		t.Errorf("%q", f.Claim)
	}
	one(t, fs, "nccl-timeout-not-read")
	one(t, fs, "nccl-monitoring-off")
	none(t, fs, "nccl-no-dump-on-timeout")
	none(t, fs, "nccl-async-error-handling-unset")
	if e, ok := evidence(old, "NCCL in use"); !ok || !strings.Contains(e.Text, "libnccl.so.2") {
		t.Errorf("the NCCL finding should say how NCCL was seen: %+v", old.Evidence)
	}
	var backends []string
	for _, f := range fs {
		if f.ID == "distributed-backend" {
			backends = append(backends, f.Claim)
		}
	}
	want := []string{"ranks 0-1 use NCCL: they map libnccl.so.2 and run no NCCL thread",
		"rank 2 uses NCCL: it maps no collective library (libnccl, librccl, libmpi, libucc, libgloo) and runs NCCL threads (pt_nccl_watchdg)"}
	if strings.Join(backends, "\n") != strings.Join(want, "\n") {
		t.Errorf("backends\n%s\nwant\n%s", strings.Join(backends, "\n"), strings.Join(want, "\n"))
	}
}

// A gloo job gets no NCCL advice: the ranks map libgloo and no NCCL.
func TestNCCLAdviceOnlyWithNCCL(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	for r := range 3 {
		b.proc(10+r, 1, "python3", nil, map[string]string{"RANK": string(rune('0' + r)), "WORLD_SIZE": "3"}).Collectives =
			&timeline.Collectives{Mapped: []string{"/usr/lib/libgloo.so.0.5.0"}}
	}
	b.proc(20, 1, "python3", nil, map[string]string{"RANK": "3"}) // maps not read
	fs := ncclFindings(newView(b.tl), true)
	for _, f := range fs {
		if strings.HasPrefix(f.ID, "nccl-") {
			t.Errorf("NCCL advice for a job without NCCL: %s: %s", f.ID, f.Claim)
		}
	}
	if len(fs) != 2 {
		t.Fatalf("want two distributed-backend findings, got %+v", fs)
	}
	if want := "ranks 0-2 use gloo, not NCCL (they map libgloo.so.0.5.0 but no NCCL library, and run no NCCL thread): the NCCL settings do not apply and were not checked"; fs[0].Claim != want || fs[0].Severity != finding.Info {
		t.Errorf("claim\n got %q\nwant %q", fs[0].Claim, want)
	}
	if !strings.Contains(fs[0].Decision, "30 minutes by default") {
		t.Errorf("%q", fs[0].Decision)
	}
	if !strings.HasPrefix(fs[1].Claim, "Whether rank 3 uses NCCL was not seen") {
		t.Errorf("%q", fs[1].Claim)
	}
}

func TestNCCLUnsetEscalatesWhenStalled(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "python3", nil, map[string]string{"LOCAL_RANK": "0"}).Collectives = ncclMapped()
	if f := one(t, ncclFindings(newView(b.tl), false), "nccl-async-error-handling-unset"); f.Severity != finding.Info || !strings.HasSuffix(f.Claim, "(local rank 0)") {
		t.Errorf("%+v", f)
	}
	if f := one(t, ncclFindings(newView(b.tl), true), "nccl-async-error-handling-unset"); f.Severity != finding.Warning {
		t.Errorf("%+v", f)
	}
}

// trainerWithWorkers builds a trainer and n workers started by method.
func trainerWithWorkers(b *tlb, n int, method string) {
	tr := b.proc(100, 1, "python3", []string{"/usr/bin/python3", "train.py", "--lr", "3e-4"}, nil)
	tr.CPUsAllowed = "0-3"
	b.quietProc(100)
	for i := range n {
		pid := 200 + i
		switch method {
		case Fork:
			b.proc(pid, 100, "python3", []string{"/usr/bin/python3", "train.py", "--lr", "3e-4"}, nil)
		case Spawn:
			b.proc(pid, 100, "python3", []string{"/usr/bin/python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=7)", "--multiprocessing-fork"}, nil)
		case Forkserver:
			b.proc(150, 100, "python3", []string{"/usr/bin/python3", "-c", "from multiprocessing.forkserver import main; main(8, 9, ['__main__'], **{})"}, nil)
			b.proc(pid, 150, "python3", []string{"/usr/bin/python3", "-c", "from multiprocessing.forkserver import main; main(8, 9, ['__main__'], **{})"}, nil)
		}
	}
	b.proc(190, 100, "python3", []string{"/usr/bin/python3", "-c", "from multiprocessing.resource_tracker import main;main(5)"}, nil)
}

func TestStartMethods(t *testing.T) {
	for _, m := range []string{Fork, Spawn, Forkserver} {
		b := newTL(31, 100*time.Millisecond)
		trainerWithWorkers(b, 3, m)
		gs := WorkerGroups(newView(b.tl))
		if len(gs) != 1 || gs[0].Method != m || gs[0].Parent != 100 || len(gs[0].Workers) != 3 {
			t.Errorf("%s: groups %+v", m, gs)
			continue
		}
		f := one(t, workerFindings(newView(b.tl), gs), "worker-start-method")
		if f.Claim != "pid 100 (python3) started 3 worker processes by "+m {
			t.Errorf("%q", f.Claim)
		}
	}
}

// TestWorkersThatMayBeRanks: ranks forked by their launcher look like
// forked workers when their environment (RANK) cannot be read, as for
// another user's job. The finding says they may be ranks, and why it cannot
// tell; DataLoader workers, known by their threads' name, are not doubted.
func TestWorkersThatMayBeRanks(t *testing.T) {
	for _, c := range []struct {
		role   string
		hidden int
		want   string
	}{
		{"worker", 2, "pid 100 (python3) started 2 worker processes by fork; they may be ranks rather than workers: their environment, where a launcher names each rank (RANK), is not visible"},
		{"worker", 1, "pid 100 (python3) started 2 worker processes by fork; they may be ranks rather than workers: the environment of 1 of them, where a launcher names each rank (RANK), is not visible"},
		{"worker", 0, "pid 100 (python3) started 2 worker processes by fork"},
		{"dataloader-worker", 2, "pid 100 (python3) started 2 worker processes by fork"},
	} {
		b := newTL(31, 100*time.Millisecond)
		trainerWithWorkers(b, 2, Fork)
		for _, p := range b.tl.Procs {
			if p.Key.PID >= 200 {
				p.Role = c.role
				if p.Key.PID < 200+c.hidden {
					p.NotVisible = map[string]string{"env": "not visible: needs CAP_SYS_PTRACE"}
				}
			}
		}
		v := newView(b.tl)
		f := one(t, workerFindings(v, WorkerGroups(v)), "worker-start-method")
		if f.Claim != c.want {
			t.Errorf("%s, %d hidden: %q, want %q", c.role, c.hidden, f.Claim, c.want)
		}
		said := false
		for _, e := range f.Evidence {
			said = said || e.Source == "/proc/PID/environ" && strings.Contains(e.Text, "needs CAP_SYS_PTRACE")
		}
		if said != (c.want != "pid 100 (python3) started 2 worker processes by fork") {
			t.Errorf("%s, %d hidden: evidence %+v", c.role, c.hidden, f.Evidence)
		}
	}
}

func TestWorkersExceedCores(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	trainerWithWorkers(b, 6, Fork)
	v := newView(b.tl)
	f := one(t, workerFindings(v, WorkerGroups(v)), "workers-exceed-cores")
	if !strings.Contains(f.Claim, "6 worker processes on 4 CPUs") {
		t.Errorf("%q", f.Claim)
	}
	if cpusAllowed("0-3,8,10-11") != 7 || cpusAllowed("bad") != 0 || cpusAllowed("3-1") != 0 {
		t.Error("cpusAllowed")
	}
}

func TestForkAfterCUDA(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	trainerWithWorkers(b, 2, Fork)
	cuda := &timeline.CUDAUse{Mapped: []string{"/dev/nvidiactl", "/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"}, DeviceFDs: []string{"/dev/nvidia0", "/dev/nvidiactl"}}
	for _, p := range b.tl.Procs {
		if p.Key.PID == 100 || p.Key.PID == 200 || p.Key.PID == 201 {
			p.CUDA = cuda
		}
	}
	v := newView(b.tl)
	f := one(t, workerFindings(v, WorkerGroups(v)), "fork-after-cuda-init")
	if f.Severity != finding.Warning || len(f.Evidence) != 3 || !strings.Contains(f.Evidence[1].Text, "/dev/nvidia0") {
		t.Errorf("%+v", f)
	}
	// a forked worker listed as a compute process on the GPU: critical
	b.tl.Ticks[5].GPUs = []gpu.Sample{{Index: 0, Processes: []gpu.Process{{PID: 201}}}}
	v = newView(b.tl)
	if f := one(t, workerFindings(v, WorkerGroups(v)), "fork-after-cuda-init"); f.Severity != finding.Critical || !strings.Contains(f.Claim, "worker pid 201 uses the GPU") {
		t.Errorf("%+v", f)
	}
	// spawn workers of a CUDA parent are fine
	b = newTL(31, 100*time.Millisecond)
	trainerWithWorkers(b, 2, Spawn)
	for _, p := range b.tl.Procs {
		p.CUDA = cuda
	}
	v = newView(b.tl)
	none(t, workerFindings(v, WorkerGroups(v)), "fork-after-cuda-init")
}

// cowJob: n forked workers whose USS grows by rate bytes/s from 50 MiB
// while their resident memory grows by rssRate (0: copy-on-write, resident
// memory flat at the parent's); the parent holds parentRSS bytes; the
// cgroup allows limit with usage.
func cowJob(n int, rate, rssRate float64, parentRSS uint64, limit, usage uint64) *timeline.Timeline {
	b := newTL(101, 100*time.Millisecond)
	trainerWithWorkers(b, n, Fork)
	for _, p := range b.tl.Procs {
		p.MemCgroup = &timeline.MemCgroup{Version: 1, Path: "/job", LimitAt: "/job", LimitBytes: u64(limit), UsageBytes: u64(usage)}
	}
	b.tl.Ticks[100].Procs[0].RSSPages = parentRSS / 4096
	for i := range n {
		b.procSamples(200+i, func(i int) (timeline.ProcSample, bool) {
			s := timeline.ProcSample{Threads: 1, RSSPages: uint64(float64(parentRSS)+rssRate*b.secs(i)) / 4096}
			if i%10 == 0 { // smaps_rollup on its tier: once a second
				uss := uint64(50<<20 + rate*b.secs(i))
				s.USSBytes, s.PSSBytes = u64(uss), u64(uss+10<<20)
			}
			return s, true
		})
	}
	return b.tl
}

func cowOf(tl *timeline.Timeline) []finding.Finding {
	v := newView(tl)
	return cowFindings(v, derive.New(tl), WorkerGroups(v))
}

func TestCOWGrowthProjected(t *testing.T) {
	f := one(t, cowOf(cowJob(2, 5<<20, 0, 8<<30, 4<<30, 3<<30)), "worker-cow-growth") // 5 MiB/s per worker, 1 GiB left, parent holds 8 GiB
	want := "2 forked workers of pid 100 (python3) copy its memory at 10.0 MiB/s together, copy-on-write: their unique memory rises while their resident memory stays flat, " +
		"so pages they shared with it become their own as they touch its Python objects; they hold 200.0 MiB of their own, 184.0 MiB more than 2 fresh forks (8.0 MiB each); " +
		"at this rate the memory cgroup limit (4.0 GiB on /job) is reached in 2 min"
	if f.Severity != finding.Warning || f.Claim != want {
		t.Errorf("claim\n got %q\nwant %q (%s)", f.Claim, want, f.Severity)
	}
	if e, _ := evidence(f, "USS) of worker pid 200"); e.Value != 5 || e.Unit != "MiB/s" || !strings.Contains(e.Window, "11 samples over 10.0 s") {
		t.Errorf("%+v", e)
	}
	if e, _ := evidence(f, "RSS) of worker pid 200"); e.Value != 0 || e.Unit != "MiB/s" {
		t.Errorf("%+v", e)
	}
	if e, _ := evidence(f, "projected time"); e.Value != 102 {
		t.Errorf("%+v", e)
	}
}

func TestCOWGrowthSaturatesBelowLimit(t *testing.T) {
	f := one(t, cowOf(cowJob(2, 5<<20, 0, 200<<20, 64<<30, 1<<30)), "worker-cow-growth") // each worker still shares 200 - 100 MiB
	if f.Severity != finding.Info || !strings.Contains(f.Claim, "at most 200.0 MiB more once each has copied all it still shares, which fits in the memory cgroup limit") {
		t.Errorf("%+v", f.Claim)
	}
}

// Four workers each copying 0.4 MiB/s (a real DataLoader over a list of
// floats): 1.6 MiB/s together is a finding, though no single worker
// reaches 1 MiB/s.
func TestCOWSlowButSummed(t *testing.T) {
	f := one(t, cowOf(cowJob(4, 0.4*(1<<20), 0, 8<<30, 64<<30, 1<<30)), "worker-cow-growth")
	if !strings.HasPrefix(f.Claim, "4 forked workers of pid 100 (python3) copy its memory at 1.6 MiB/s together") {
		t.Errorf("%q", f.Claim)
	}
}

func TestNoCOWWhenFlat(t *testing.T) {
	none(t, cowOf(cowJob(4, 20<<10, 0, 8<<30, 4<<30, 3<<30)), "worker-cow-growth") // 20 KiB/s each: flat storage
}

// Workers whose resident memory grows as fast as their unique memory
// allocate (a cache, a leak): that is not copy-on-write.
func TestNoCOWWhenWorkersAllocate(t *testing.T) {
	none(t, cowOf(cowJob(2, 5<<20, 5<<20, 8<<30, 4<<30, 3<<30)), "worker-cow-growth")
}

func fdJob(rate float64, start, soft int, kinds *timeline.FDKinds) *timeline.Timeline {
	b := newTL(101, 100*time.Millisecond)
	p := b.proc(10, 1, "python3", []string{"python3", "load.py"}, nil)
	p.NoFileSoft = u64(uint64(soft))
	p.FDKinds = kinds
	b.procSamples(10, func(i int) (timeline.ProcSample, bool) {
		if i%10 != 0 {
			return timeline.ProcSample{}, false
		}
		return timeline.ProcSample{FDs: intp(start + int(rate*b.secs(i)))}, true
	})
	return b.tl
}

func fdf(tl *timeline.Timeline) []finding.Finding { return fdFindings(newView(tl), derive.New(tl)) }

func TestFDUnlimited(t *testing.T) {
	tl := fdJob(20, 10, 1024, nil)
	for _, p := range tl.Procs {
		p.NoFileSoft = u64(^uint64(0))
	}
	none(t, fdf(tl), "fd-exhaustion")
}

func TestFDLeak(t *testing.T) {
	kinds := &timeline.FDKinds{ByKind: map[string]int{"file": 120, "socket": 40, "pipe": 40}, TopDirs: []timeline.DirCount{{Dir: "/data/shards", N: 118}}}
	fs := fdf(fdJob(20, 10, 1024, kinds))
	f := one(t, fs, "fd-exhaustion")
	want := "pid 10 (python3) leaks file descriptors: 210 open of a soft limit of 1024, 20.0 more every second: it hits EMFILE (\"Too many open files\") in 41 s; 120 files (118 under /data/shards), 40 pipe ends, 40 sockets"
	if f.Claim != want || f.Severity != finding.Critical {
		t.Errorf("claim\n got %q\nwant %q (%s)", f.Claim, want, f.Severity)
	}
	// slower leak: warning
	if f := one(t, fdf(fdJob(2, 10, 1024, nil)), "fd-exhaustion"); f.Severity != finding.Warning || !strings.Contains(f.Claim, "in 8 min") {
		t.Errorf("%+v", f.Claim)
	}
	// a process opening its first handles at start-up (1/s, 10 in the window) is no leak
	none(t, fdf(fdJob(1, 10, 1024, nil)), "fd-exhaustion")
	// flat and far from the limit: nothing; flat and near: one
	none(t, fdf(fdJob(0, 100, 1024, nil)), "fd-exhaustion")
	if f := one(t, fdf(fdJob(0, 950, 1024, nil)), "fd-exhaustion"); !strings.Contains(f.Claim, "one burst from EMFILE") {
		t.Errorf("%q", f.Claim)
	}
}

func gilJob(b *tlb, threads int, run, wait float64) {
	b.proc(10, 1, "python3", []string{"python3", "x.py"}, nil)
	for i := range threads {
		b.thread(10, 10+i, "busy", b.busy(run, wait))
	}
	b.thread(10, 99, "idle", idle("futex", "", ""))
}

func TestGIL(t *testing.T) {
	// measured GIL-bound: 3 threads, 0.33 core each, wanting 0.5 each
	b := newTL(31, 100*time.Millisecond)
	gilJob(b, 3, 0.33, 0.17)
	v := newView(b.tl)
	f := one(t, gilFindings(v, v.threadCPUs()), "gil-contention")
	if !strings.Contains(f.Claim, "3 busy Python threads ran 0.99 cores together and wanted only 1.50 CPUs") {
		t.Errorf("%q", f.Claim)
	}
	// free threads (released GIL) on a loaded host: each wants a whole CPU
	b = newTL(31, 100*time.Millisecond)
	gilJob(b, 3, 0.4, 0.6)
	v = newView(b.tl)
	none(t, gilFindings(v, v.threadCPUs()), "gil-contention")
	// the GIL-bound threads on a saturated host: each runs 3 % of a core
	// and waits for a CPU 30 % of the time (its turns with the GIL)
	b = newTL(31, 100*time.Millisecond)
	gilJob(b, 3, 0.03, 0.30)
	v = newView(b.tl)
	if f := one(t, gilFindings(v, v.threadCPUs()), "gil-contention"); !strings.Contains(f.Claim, "3 busy Python threads ran 0.09 cores together and wanted only 0.99 CPUs") {
		t.Errorf("%q", f.Claim)
	}
	// free threads on that host: each runs 5 % and wants a whole CPU
	b = newTL(31, 100*time.Millisecond)
	gilJob(b, 3, 0.05, 0.95)
	v = newView(b.tl)
	none(t, gilFindings(v, v.threadCPUs()), "gil-contention")
	// one busy thread is no contention
	b = newTL(31, 100*time.Millisecond)
	gilJob(b, 1, 1, 0)
	v = newView(b.tl)
	none(t, gilFindings(v, v.threadCPUs()), "gil-contention")
}

// TestAllowlistHoldsWhatTheChecksRead: every variable the NCCL and rank
// checks read must be kept by the sampler's environment allowlist.
func TestAllowlistHoldsWhatTheChecksRead(t *testing.T) {
	allowed := map[string]bool{}
	for _, k := range procfs.EnvAllowlist {
		allowed[k] = true
	}
	for _, k := range NCCLEnvAllowlist {
		if !allowed[k] {
			t.Errorf("%s is read by the checks but not allowlisted in internal/probe/proc", k)
		}
	}
}

// A rank opening its libraries, CUDA handles and sockets at start-up grows
// fast for a few seconds and then holds: 3 descriptors to 40 in the first
// 4 s of a 10 s window (a least-squares slope of ~3/s over the window), flat
// after. That is start-up, not a leak: a leak keeps growing in the window's
// later half.
func TestFDStartupBurstIsNoLeak(t *testing.T) {
	b := newTL(101, 100*time.Millisecond)
	p := b.proc(10, 1, "python3", []string{"python3", "train.py"}, nil)
	p.NoFileSoft = u64(1024)
	b.procSamples(10, func(i int) (timeline.ProcSample, bool) {
		if i%5 != 0 {
			return timeline.ProcSample{}, false
		}
		n := 3 + int(9.25*b.secs(i))
		if b.secs(i) >= 4 {
			n = 40
		}
		return timeline.ProcSample{FDs: intp(n)}, true
	})
	none(t, fdf(b.tl), "fd-exhaustion")
	// The same growth kept up to the end is reported.
	b = newTL(101, 100*time.Millisecond)
	p = b.proc(10, 1, "python3", []string{"python3", "train.py"}, nil)
	p.NoFileSoft = u64(1024)
	b.procSamples(10, func(i int) (timeline.ProcSample, bool) {
		if i%5 != 0 {
			return timeline.ProcSample{}, false
		}
		return timeline.ProcSample{FDs: intp(3 + int(9.25*b.secs(i)))}, true
	})
	one(t, fdf(b.tl), "fd-exhaustion")
}

// levelJob: n forked workers that hold copied bytes each in the mappings
// they inherited at the window's start, and copy rate bytes/s more (smaps
// read once a second); the parent holds parentRSS there; the cgroup allows
// limit with usage. No USS readings: the level alone is judged.
func levelJob(n int, copied, rate, parentRSS float64, limit, usage uint64) *timeline.Timeline {
	b := newTL(101, 100*time.Millisecond)
	trainerWithWorkers(b, n, Fork)
	for _, p := range b.tl.Procs {
		p.MemCgroup = &timeline.MemCgroup{Version: 1, Path: "/job", LimitAt: "/job", LimitBytes: u64(limit), UsageBytes: u64(usage)}
	}
	for i := range n {
		b.procSamples(200+i, func(i int) (timeline.ProcSample, bool) {
			s := timeline.ProcSample{Threads: 1, RSSPages: uint64(parentRSS) / 4096}
			if i%10 == 0 {
				c := copied + rate*b.secs(i)
				s.Inherited = &timeline.Inherited{Mappings: 120, CopiedBytes: uint64(c), SharedBytes: uint64(parentRSS - c), ParentRSSBytes: uint64(parentRSS)}
			}
			return s, true
		})
	}
	return b.tl
}

// Workers that copied 40 MiB each before the window and copy nothing more
// (a DataLoader attached late): found by the level, though the rate is nil.
func TestCOWLevelWithoutRate(t *testing.T) {
	f := one(t, cowOf(levelJob(4, 40<<20, 0, 215<<20, 64<<30, 1<<30)), "worker-cow-growth")
	want := "4 forked workers of pid 100 (python3) hold 160.0 MiB of private copies of its memory, copy-on-write: pages they shared with it became their own as they touched its Python objects; " +
		"that is 136.0 MiB more than 4 fresh forks (6.0 MiB each), 40.0 MiB per worker of the 215.0 MiB it holds in those mappings; they copy nothing more now; " +
		"at most 700.0 MiB more once each has copied all it still shares, which fits in the memory cgroup limit (64.0 GiB on /job)"
	if f.Severity != finding.Info || f.Claim != want {
		t.Errorf("claim\n got %q\nwant %q (%s)", f.Claim, want, f.Severity)
	}
	if e, ok := evidence(f, "copied so far by the 4 workers together"); !ok || e.Value != 160 || e.Unit != "MiB" {
		t.Errorf("%+v", e)
	}
	if e, ok := evidence(f, "copy rate of the workers together"); !ok || e.Value != 0 || !strings.Contains(e.Window, "10.0 s") {
		t.Errorf("%+v", e)
	}
	if e, ok := evidence(f, "copied by worker pid 203"); !ok || e.Value != 40 || !strings.Contains(e.What, "120 mappings") {
		t.Errorf("%+v", e)
	}
}

// Workers over flat storage hold what a fresh fork holds (4 MiB each,
// measured): nothing is found, however long they ran.
func TestCOWLevelNoneForFreshForks(t *testing.T) {
	none(t, cowOf(levelJob(4, 4<<20, 0, 122<<20, 64<<30, 1<<30)), "worker-cow-growth")
	// 16 MiB beyond fresh forks, but a sliver of a large parent (the
	// interpreter's objects every worker touches): not found either.
	none(t, cowOf(levelJob(4, 12<<20, 0, 8<<30, 64<<30, 1<<30)), "worker-cow-growth")
}

// Copies taking a tenth of the memory limit are a warning, copying or not.
func TestCOWLevelWarnsByShareOfLimit(t *testing.T) {
	f := one(t, cowOf(levelJob(8, 200<<20, 0, 1<<30, 12<<30, 6<<30)), "worker-cow-growth")
	if f.Severity != finding.Warning || !strings.Contains(f.Claim, "; the copies already take 13 % of the memory cgroup limit (12.0 GiB)") {
		t.Errorf("%s %q", f.Severity, f.Claim)
	}
	// Copying at 10 MiB/s with 1 GiB left: the limit in under two minutes.
	f = one(t, cowOf(levelJob(2, 20<<20, 5<<20, 1<<30, 4<<30, 3<<30)), "worker-cow-growth")
	if f.Severity != finding.Warning || !strings.Contains(f.Claim, "they copy 10.0 MiB/s together now; at this rate the memory cgroup limit (4.0 GiB on /job) is reached in 2 min") {
		t.Errorf("%s %q", f.Severity, f.Claim)
	}
}

// Workers replaced during the window (an epoch ending without
// persistent_workers): said, with the fix.
func TestCOWLevelRespawnedWorkers(t *testing.T) {
	tl := levelJob(4, 40<<20, 0, 215<<20, 64<<30, 1<<30)
	for _, p := range tl.Procs {
		switch p.Key.PID {
		case 200, 201:
			p.Exited, p.LastSeen = true, tl.Ticks[40].T
		case 202, 203:
			p.FirstSeen = tl.Ticks[50].T
		}
	}
	for i := range tl.Ticks {
		tk := &tl.Ticks[i]
		kept := tk.Procs[:0]
		for _, s := range tk.Procs {
			if (s.PID == 200 || s.PID == 201) && i > 40 || (s.PID == 202 || s.PID == 203) && i < 50 {
				continue
			}
			kept = append(kept, s)
		}
		tk.Procs = kept
	}
	f := one(t, cowOf(tl), "worker-cow-growth")
	if !strings.Contains(f.Claim, "2 workers exited and 2 were forked during the window: workers started anew (each epoch without persistent_workers) copy again from nothing") ||
		!strings.Contains(f.Decision, "persistent_workers=True") || !strings.HasPrefix(f.Claim, "2 forked workers of pid 100 (python3) hold 80.0 MiB") {
		t.Errorf("%q\n%q", f.Claim, f.Decision)
	}
}

// Workers that copied little so far but copy now (a DataLoader on a loaded
// host, 3 s after its start): found by the growth of their copies, 0.3
// MiB/s together, below the unique-memory rule's rate.
func TestCOWLevelSlowCopying(t *testing.T) {
	f := one(t, cowOf(levelJob(4, 6<<20, 75<<10, 215<<20, 64<<30, 1<<30)), "worker-cow-growth")
	if !strings.Contains(f.Claim, "they copy 300.0 KiB/s together now") {
		t.Errorf("%q", f.Claim)
	}
	none(t, cowOf(levelJob(4, 6<<20, 20<<10, 215<<20, 64<<30, 1<<30)), "worker-cow-growth") // 80 KiB/s: too little
}

// TestGILNamesLeftToTheRenderers: gil-contention names the process and
// its threads as the kernel gave them, as the live rules' findings beside
// it do, and the renderers escape them the one way (text: ESC and U+202E
// as ?; JSON: the data kept, \u001b). It escaped them itself, so every
// output read py\x1b[2Jthon, unlike the rest of the report.
func TestGILNamesLeftToTheRenderers(t *testing.T) {
	b := newTL(31, 100*time.Millisecond)
	b.proc(10, 1, "py\x1b[2Jthon", []string{"python3", "x.py"}, nil)
	for i := range 3 {
		b.thread(10, 10+i, "bu\u202esy", b.busy(0.33, 0.17))
	}
	v := newView(b.tl)
	f := one(t, gilFindings(v, v.threadCPUs()), "gil-contention")
	if f.Subject != "pid 10 (py\x1b[2Jthon)" || !strings.HasPrefix(f.Claim, "pid 10 (py\x1b[2Jthon) shows GIL contention") {
		t.Errorf("subject %q, claim %q: want the name as the kernel gave it", f.Subject, f.Claim)
	}
	if len(f.Evidence) == 0 || f.Evidence[0].What != "CPU of tid 10 (bu\u202esy)" {
		t.Errorf("evidence %+v: want the thread's name as the kernel gave it", f.Evidence)
	}
	if got := safetext.Clean(f.Claim); !strings.HasPrefix(got, "pid 10 (py?[2Jthon) shows") {
		t.Errorf("as text: %q", got)
	}
	js, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `py\u001b[2Jthon`) || strings.Contains(string(js), `\\x1b`) {
		t.Errorf("as JSON: %s", js)
	}
}
