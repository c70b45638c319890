package procfs

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Real lines, captured from Linux 6.18 (x86-64).
const (
	realStat      = "26412 (cat) R 26410 26410 5455 0 -1 4194304 99 0 0 0 7 3 0 0 20 0 1 0 101821 3133440 392 18446744073709551615 94022040387584 94022040407465 140722673145152 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 94022040423472 94022040425088 94022545096704 140722673146562 140722673146582 140722673146582 140722673147883 0\n"
	trickyStat    = "77 (a) b (c) S 1 77 77 0 -1 4194560 0 0 0 0 12 34 0 0 20 0 9 0 555 0 0 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	realSchedstat = "188561 59668 1\n"
	realStatm     = "766 392 336 5 0 88 0\n"
	realRollup    = `563e4ab6f000-7ffc7565e000 ---p 00000000 00:00 0                          [rollup]
Rss:                1748 kB
Pss:                 248 kB
Pss_Dirty:           116 kB
Shared_Clean:       1592 kB
Shared_Dirty:          0 kB
Private_Clean:        40 kB
Private_Dirty:       116 kB
Swap:                  0 kB
`
	realIO     = "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 0\nread_bytes: 4096\nwrite_bytes: 0\ncancelled_write_bytes: 0\n"
	realLimits = `Limit                     Soft Limit           Hard Limit           Units     
Max cpu time              unlimited            unlimited            seconds   
Max open files            20000                1048576              files     
Max locked memory         8388608              8388608              bytes     
`
	realPressure = "some avg10=87.47 avg60=69.79 avg300=48.78 total=281176605\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=12\n"
)

func TestParseStat(t *testing.T) {
	var s Stat
	if err := ParseStat([]byte(realStat), &s); err != nil {
		t.Fatal(err)
	}
	if string(s.Comm) != "cat" || s.State != 'R' || s.PPID != 26410 || s.UTime != 7 || s.STime != 3 ||
		s.NumThreads != 1 || s.StartTime != 101821 || s.Processor != 1 {
		t.Errorf("got %+v comm %q", s, s.Comm)
	}
	// A name with parentheses and spaces is cut at the last ')'.
	if err := ParseStat([]byte(trickyStat), &s); err != nil {
		t.Fatal(err)
	}
	if string(s.Comm) != "a) b (c" || s.State != 'S' || s.UTime != 12 || s.STime != 34 || s.NumThreads != 9 || s.StartTime != 555 {
		t.Errorf("tricky: got %+v comm %q", s, s.Comm)
	}
	// cutime and cstime (fields 16, 17): the reaped children's CPU.
	reaped := strings.Replace(realStat, " 7 3 0 0 20 ", " 7 3 41 5 20 ", 1)
	if err := ParseStat([]byte(reaped), &s); err != nil {
		t.Fatal(err)
	}
	if s.UTime != 7 || s.STime != 3 || s.CUTime != 41 || s.CSTime != 5 {
		t.Errorf("cutime, cstime: got %+v", s)
	}
}

func TestParseStatErrors(t *testing.T) {
	for _, in := range []string{"", "12 cat R", "12 (cat) R 1 2", "12 (cat) R x 1 1 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 5"} {
		var s Stat
		err := ParseStat([]byte(in), &s)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("%q: want a *ParseError, got %v", in, err)
		}
	}
}

func TestParseStatAllocatesNothing(t *testing.T) {
	b := []byte(realStat)
	sb := []byte(realSchedstat)
	var s Stat
	var ss Schedstat
	allocs := testing.AllocsPerRun(100, func() {
		_ = ParseStat(b, &s)
		_ = ParseSchedstat(sb, &ss)
	})
	if allocs != 0 {
		t.Errorf("hot-path parsers allocate %.0f times per call", allocs)
	}
}

func TestParseSchedstatAndStatm(t *testing.T) {
	var ss Schedstat
	if err := ParseSchedstat([]byte(realSchedstat), &ss); err != nil || ss != (Schedstat{188561, 59668, 1}) {
		t.Errorf("schedstat %+v %v", ss, err)
	}
	if err := ParseSchedstat([]byte("1 2\n"), &ss); err == nil {
		t.Error("two fields: want an error")
	}
	var sm Statm
	if err := ParseStatm([]byte(realStatm), &sm); err != nil || sm != (Statm{766, 392, 336}) {
		t.Errorf("statm %+v %v", sm, err)
	}
}

func TestParseStatus(t *testing.T) {
	in := "Name:\tpython3\nState:\tS (sleeping)\nThreads:\t12\nNSpid:\t4242\t17\nCpus_allowed_list:\t0-3,8\nMems_allowed_list:\t0\nvoluntary_ctxt_switches:\t150\nnonvoluntary_ctxt_switches:\t545\n"
	s, err := ParseStatus("status", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if !s.HaveCtxt || s.VoluntaryCtxt != 150 || s.NonvoluntaryCtxt != 545 || s.Threads != 12 ||
		s.CPUsAllowedList != "0-3,8" || s.MemsAllowedList != "0" || len(s.NSpid) != 2 || s.NSpid[1] != 17 {
		t.Errorf("got %+v", s)
	}
	_, err = ParseStatus("/proc/1/status", []byte("voluntary_ctxt_switches:\tmany\n"))
	if err == nil || !strings.Contains(err.Error(), "/proc/1/status: line 1") {
		t.Errorf("want an error naming file and line, got %v", err)
	}
}

func TestParseIO(t *testing.T) {
	io, err := ParseIO("io", []byte(realIO))
	if err != nil || io.RChar != 6976 || io.SyscR != 10 || io.ReadBytes != 4096 {
		t.Errorf("%+v %v", io, err)
	}
	if _, err := ParseIO("io", []byte("rchar: 1\n")); err == nil {
		t.Error("missing counters: want an error")
	}
}

func TestParseRollup(t *testing.T) {
	r, err := ParseRollup("smaps_rollup", []byte(realRollup))
	if err != nil || r.RSS != 1748*1024 || r.PSS != 248*1024 || r.USS != (40+116)*1024 {
		t.Errorf("%+v %v", r, err)
	}
	if _, err := ParseRollup("smaps_rollup", []byte("Rss: 1 kB\n")); err == nil {
		t.Error("missing Pss: want an error")
	}
}

func TestParseNoFile(t *testing.T) {
	n, err := ParseNoFile("limits", []byte(realLimits))
	if err != nil || n.Soft != 20000 || n.Hard != 1048576 {
		t.Errorf("%+v %v", n, err)
	}
	n, err = ParseNoFile("limits", []byte("Max open files            unlimited            unlimited            files\n"))
	if err != nil || n.Soft != Unlimited || n.Hard != Unlimited {
		t.Errorf("unlimited: %+v %v", n, err)
	}
	if _, err := ParseNoFile("limits", []byte("Max cpu time unlimited unlimited seconds\n")); err == nil {
		t.Error("no open-files line: want an error")
	}
}

func TestParsePressure(t *testing.T) {
	p, err := ParsePressure("cpu", []byte(realPressure))
	if err != nil || p.Some.TotalUS != 281176605 || p.Full == nil || p.FullUS() != 12 {
		t.Errorf("%+v %v", p, err)
	}
	if err == nil && (p.Some.Avg10 != 87.47 || p.Some.Avg60 != 69.79 || p.Some.Avg300 != 48.78) {
		t.Errorf("averages: %+v", *p.Some)
	}
	if _, err := ParsePressure("cpu", []byte("some avg10=1.0\n")); err == nil {
		t.Error("no total: want an error")
	}
}

func TestParseMeminfo(t *testing.T) {
	in := "MemTotal:       24683652 kB\nMemFree:        1 kB\nMemAvailable:   23997748 kB\nDirty:             14440 kB\nWriteback:             0 kB\nSwapTotal:             0 kB\nSwapFree:              0 kB\nHugePages_Total:       0\n"
	var m timeline.MemInfo
	if err := hostMeminfo("meminfo", []byte(in), &m); err != nil || m.Total != 24683652*1024 || m.Available != 23997748*1024 || m.Dirty != 14440*1024 {
		t.Errorf("%+v %v", m, err)
	}
	if err := hostMeminfo("meminfo", []byte("MemFree: 1 kB\n"), &m); err == nil {
		t.Error("no MemTotal: want an error")
	}
}

func TestParseDiskstats(t *testing.T) {
	in := "   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n 253       0 vda 102065 1200 3240746 37237 60534 900 4927448 19954 0 14484 57943 0 0 0 0 0 0\n 253       1 vda1 100 0 800 10 0 0 0 0 0 10 10\n"
	got, err := ParseDiskstats("diskstats", []byte(in), nil, func(n []byte) bool { return string(n) == "vda" })
	if err != nil || len(got) != 1 {
		t.Fatalf("%+v %v", got, err)
	}
	d := got[0]
	if d.Name != "vda" || d.Reads != 102065 || d.SectorsRead != 3240746 || d.ReadMS != 37237 || d.Writes != 60534 || d.IOTicksMS != 14484 || d.QueueMS != 57943 {
		t.Errorf("%+v", d)
	}
	if _, err := ParseDiskstats("diskstats", []byte(" 253 0 vda 1 2\n"), nil, nil); err == nil {
		t.Error("short line: want an error")
	}
}

func TestParseProcStat(t *testing.T) {
	in := "cpu  100 0 50 1000 5 0 1 0 0 0\ncpu0 60 1 30 500 2 3 1 4 0 0\ncpu1 40 0 20 500 3 0 0 0 0 0\nintr 12345 1 2 3\nctxt 4200001\nbtime 1700000000\nprocesses 9000\nprocs_running 8\nprocs_blocked 1\nsoftirq 1 2 3\n"
	var hs HostStat
	if err := ParseProcStat("stat", []byte(in), &hs); err != nil {
		t.Fatal(err)
	}
	if len(hs.CPUs) != 2 || hs.CPUs[0].User != 60 || hs.CPUs[0].Nice != 1 || hs.CPUs[0].IRQ != 3 || hs.CPUs[0].Steal != 4 ||
		hs.CPUs[1].CPU != 1 || hs.Ctxt != 4200001 || hs.Processes != 9000 || hs.ProcsRunning != 8 || hs.ProcsBlocked != 1 {
		t.Errorf("%+v", hs)
	}
	if err := ParseProcStat("stat", []byte("ctxt 1\n"), &hs); err == nil {
		t.Error("no cpu lines: want an error")
	}
}

// TestSyscallTimed reads lines of /proc/PID/task/TID/syscall recorded on
// this machine from a CPython 3.11 process (x86-64): threads blocked in
// Lock.acquire() with and without a timeout, time.sleep, poll, epoll and
// select with and without a timeout, and accept.
func TestSyscallTimed(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		timed      bool
	}{
		{"lock, no timeout", "202 0x55c818a7fb90 0x189 0x0 0x0 0x0 0xffffffff 0x7fe815ede950 0x7fe8164a3f16", false},
		{"lock, timeout", "202 0x55c818a7fb90 0x89 0x0 0x7fe8156dd9f0 0x0 0xffffffff 0x7fe8156dd940 0x7fe8164a3f16", true},
		{"time.sleep", "230 0x1 0x1 0x7fe814ed8ab0 0x0 0x0 0x7fe816b4e6e8 0x7fe814ed8a70 0x7fe8164ed545", true},
		{"poll, 1 h", "7 0x7fe8163a4760 0x1 0x36ee80 0x1 0x0 0x0 0x7fe807ffea30 0x7fe81651a26f", true},
		{"poll, forever", "7 0x7fe8163a4770 0x1 0xffffffff 0x1 0x0 0x0 0x7fe8077fda30 0x7fe81651a26f", false},
		{"epoll, 1 h", "232 0x7 0x7fe7fc000ba0 0x3ff 0x36ee80 0x0 0x0 0x7fe806ffca30 0x7fe816526f36", true},
		{"epoll, forever", "232 0xb 0x7fe7f0000ba0 0x3ff 0xffffffff 0x0 0x0 0x7fe8067fba30 0x7fe816526f36", false},
		{"select, 1 h", "270 0xf 0x7fe805fee8f0 0x0 0x0 0x7fe805fee820 0x0 0x7fe805fee810 0x7fe81651c9ec", true},
		{"accept", "288 0x10 0x7fe8057f9a10 0x7fe8057f9a04 0x80000 0x0 0x0 0x7fe8057f99b0 0x7fe816528fa8", false},
		{"futex wake (does not block)", "202 0x55c818a7fb90 0x81 0x1 0x7ff 0x0 0x0 0x1 0x2", false},
		{"running", "running", false},
	} {
		s, err := ParseSyscall("syscall", []byte(tc.line+"\n"), "x86_64")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if s.Timed() != tc.timed {
			t.Errorf("%s (%s): Timed() = %v, want %v", tc.name, s.Name, s.Timed(), tc.timed)
		}
	}
}

func TestParseSyscall(t *testing.T) {
	in := "202 0x7fa93f66ec40 0x80 0x0 0x0 0x0 0x0 0x7fa94034e6e8 0x7fa93fced545\n"
	s, err := ParseSyscall("syscall", []byte(in), "x86_64")
	if err != nil || !s.InSyscall || s.Name != "futex" || s.Args[0] != 0x7fa93f66ec40 {
		t.Errorf("%+v %v", s, err)
	}
	if _, ok := s.FDArg(); ok {
		t.Error("futex has no fd argument")
	}
	s, err = ParseSyscall("syscall", []byte("63 0x5 0x7ffd 0x1000 0x0 0x0 0x0 0x1 0x2\n"), "arm64")
	if fd, ok := s.FDArg(); err != nil || s.Name != "read" || !ok || fd != 5 {
		t.Errorf("arm64 read: %+v %v", s, err)
	}
	if s, err := ParseSyscall("syscall", []byte("running\n"), "x86_64"); err != nil || !s.Running {
		t.Errorf("running: %+v %v", s, err)
	}
	if s, err := ParseSyscall("syscall", []byte("-1 0x7ffd 0x4000\n"), "x86_64"); err != nil || s.InSyscall {
		t.Errorf("blocked outside a call: %+v %v", s, err)
	}
	if _, err := ParseSyscall("syscall", []byte("0 zz\n"), "x86_64"); err == nil {
		t.Error("bad argument: want an error")
	}
}

func TestFilterEnvKeepsOnlyTheAllowlist(t *testing.T) {
	in := "HOME=/root\x00RANK=3\x00AWS_SECRET_ACCESS_KEY=hunter2\x00OMP_NUM_THREADS=4\x00RANKX=9\x00=odd\x00noequals\x00NCCL_DEBUG=WARN"
	env := FilterEnv([]byte(in))
	want := map[string]string{"RANK": "3", "OMP_NUM_THREADS": "4", "NCCL_DEBUG": "WARN"}
	if len(env) != len(want) {
		t.Fatalf("got %v", env)
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}

func TestWalkDirents(t *testing.T) {
	// Two records: "123" and "self" (non-numeric, skipped).
	rec := func(name string) []byte {
		n := direntNameOff + len(name) + 1
		n = (n + 7) &^ 7
		b := make([]byte, n)
		b[16], b[17] = byte(n), byte(n>>8)
		copy(b[direntNameOff:], name)
		return b
	}
	buf := append(rec("123"), rec("self")...)
	buf = append(buf, rec("7")...)
	var got []int
	walkDirents(buf, func(n int) { got = append(got, n) })
	if len(got) != 2 || got[0] != 123 || got[1] != 7 {
		t.Errorf("got %v", got)
	}
}

func TestParseStatLayout(t *testing.T) {
	l, err := ParseStatLayout([]byte(realStat))
	if err != nil {
		t.Fatal(err)
	}
	want := Layout{StartCode: 94022040387584, EndCode: 94022040407465, StartStack: 140722673145152,
		StartData: 94022040423472, EndData: 94022040425088, StartBrk: 94022545096704,
		ArgStart: 140722673146562, ArgEnd: 140722673146582, EnvStart: 140722673146582, EnvEnd: 140722673147883}
	if l != want || !l.Visible() {
		t.Errorf("got %+v, want %+v", l, want)
	}
	// Another user's process without CAP_SYS_PTRACE: the kernel prints zeros.
	if l, err := ParseStatLayout([]byte(trickyStat)); err != nil || l.Visible() {
		t.Errorf("%+v %v: want a layout that is not visible", l, err)
	}
	// A kernel before 3.5 stops at field 44.
	old := "9 (x) S 1 9 9 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0 1 4194304 4196000 140000000 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
	if l, err := ParseStatLayout([]byte(old)); err != nil || l.StartCode != 4194304 || l.StartStack != 140000000 || l.StartBrk != 0 {
		t.Errorf("%+v %v", l, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 -5 24 25\n"} {
		if _, err := ParseStatLayout([]byte(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestParseLoadavgLastPID(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"3.35 2.86 2.91 3/1082 23556\n", 23556, true}, // this machine's
		{"0.00 0.00 0.00 1/93 1", 1, true},
		{"0.00 0.00 0.00 1/93 \n", 0, false},
		{"0.00 0.00 0.00 1/93 12a\n", 0, false},
		{"23556\n", 0, false},
		{"0.00 0.00 0.00 1/93 99999999999\n", 0, false},
		{"", 0, false},
	} {
		got, err := ParseLoadavgLastPID([]byte(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseLoadavgLastPID(%q) = %d, %v; want %d, ok %v", c.in, got, err, c.want, c.ok)
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if _, err := ParseLoadavgLastPID(b); err != nil {
			t.Errorf("this host's loadavg %q: %v", b, err)
		}
	}
}
