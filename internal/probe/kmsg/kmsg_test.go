package kmsg

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var bootAt = time.Date(2026, 7, 13, 14, 0, 0, 0, time.UTC)

func fixedBoot() (time.Time, error) { return bootAt, nil }

func TestParseRecord(t *testing.T) {
	e, err := ParseRecord([]byte("3,601,669905148,-;Memory cgroup out of memory: Killed process 17086 (python3)\n SUBSYSTEM=x\n"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Level != 3 || e.Seq != 601 || e.Mono != 669905148*time.Microsecond || !e.HasMono {
		t.Errorf("header: got level %d seq %d mono %s", e.Level, e.Seq, e.Mono)
	}
	if e.Message != "Memory cgroup out of memory: Killed process 17086 (python3)" {
		t.Errorf("message %q", e.Message)
	}
	// facility 1 (user) level 4
	if e, err := ParseRecord([]byte("12,9,5,c;x")); err != nil || e.Level != 4 {
		t.Errorf("user facility: %+v %v", e, err)
	}
	for _, bad := range []string{"", "no semicolon", "a,b,c;x", "6,1;x", "6,1,x;m", "6,1,99999999999999999999;m"} {
		_, err := ParseRecord([]byte(bad))
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("ParseRecord(%q): want a syntax error, got %v", bad, err)
			continue
		}
		if !strings.Contains(err.Error(), "expected") {
			t.Errorf("ParseRecord(%q): error %q does not say what was expected", bad, err)
		}
	}
}

func TestParseLine(t *testing.T) {
	local := time.Local
	cases := []struct {
		line    string
		level   int
		mono    time.Duration
		hasMono bool
		wall    time.Time
		msg     string
	}{
		{"<3>[  413.799217] Memory cgroup out of memory", 3, 413799217 * time.Microsecond, true, time.Time{}, "Memory cgroup out of memory"},
		{"[    0.000000] Linux version", -1, 0, true, time.Time{}, "Linux version"},
		{"[Mon Dec  8 17:51:31 2025] postgres invoked oom-killer: x", -1, 0, false, time.Date(2025, 12, 8, 17, 51, 31, 0, local), "postgres invoked oom-killer: x"},
		{"2024-04-29T14:55:41,679700+02:00 Out of memory: x", -1, 0, false, time.Date(2024, 4, 29, 12, 55, 41, 679700000, time.UTC), "Out of memory: x"},
		{"Dec 14 20:39:12 Mindstorm kernel: [24456.836326] a[1]: segfault", -1, 24456836326 * time.Microsecond, true, time.Time{}, "a[1]: segfault"},
		{"May 31 22:34:22 host-1 kernel: INFO: task x:1 blocked", -1, 0, false, time.Time{}, "INFO: task x:1 blocked"},
		{"2026-05-28T12:21:57.303295+00:00 vm-1 kernel:  ret_from_fork+0x44/0x70", -1, 0, false, time.Date(2026, 5, 28, 12, 21, 57, 303295000, time.UTC), " ret_from_fork+0x44/0x70"},
		{"[一 3月 2 20:25:46 2026] VLLM::EngineCor[1]: segfault", -1, 0, false, time.Time{}, "VLLM::EngineCor[1]: segfault"},
		{"[  +0.000316] pcieport 0000:00:03.0: AER", -1, 0, false, time.Time{}, "pcieport 0000:00:03.0: AER"},
		{"kernel: NVRM: Xid (PCI:0000:dc:00): 45", -1, 0, false, time.Time{}, "NVRM: Xid (PCI:0000:dc:00): 45"},
		{"no prefix at all", -1, 0, false, time.Time{}, "no prefix at all"},
		{"[unclosed bracket", -1, 0, false, time.Time{}, "[unclosed bracket"},
	}
	for _, c := range cases {
		e := ParseLine(c.line)
		if e.Level != c.level || e.Mono != c.mono || e.HasMono != c.hasMono || !e.Wall.Equal(c.wall) || e.Message != c.msg {
			t.Errorf("ParseLine(%q) = level %d mono %s/%v wall %s msg %q; want level %d mono %s/%v wall %s msg %q",
				c.line, e.Level, e.Mono, e.HasMono, e.Wall, e.Message, c.level, c.mono, c.hasMono, c.wall, c.msg)
		}
	}
	if e := parseJournalLine("[  518.050606] host kernel: Out of memory: x"); e.Message != "Out of memory: x" || e.Mono != 518050606*time.Microsecond {
		t.Errorf("journal line: %+v", e)
	}
}

// kinds recognised in a fixture, by kind.
func eventsOf(t *testing.T, path string) []Event {
	t.Helper()
	return Events(fixtureEntries(t, path))
}

func first(events []Event, k Kind) (Event, bool) {
	for _, ev := range events {
		if ev.Kind == k {
			return ev, true
		}
	}
	return Event{}, false
}

// TestLocalCapture checks the facts of the records produced on this machine.
func TestLocalCapture(t *testing.T) {
	events := eventsOf(t, "testdata/kmsg/local/local-6.18.kmsg")
	kills := Kills(events)
	if len(kills) != 1 {
		t.Fatalf("want 1 kill, got %d", len(kills))
	}
	k := kills[0]
	if k.PID != 17086 || k.Comm != "python3" || k.Constraint != "CONSTRAINT_MEMCG" || k.Trigger != "python3" {
		t.Errorf("kill identity: %+v", k)
	}
	if k.AnonRSSBytes != 65280<<10 || k.ResidentBytes != (65280+6616)<<10 || k.TotalVMBytes != 78064<<10 {
		t.Errorf("kill memory: anon %d resident %d vm %d", k.AnonRSSBytes, k.ResidentBytes, k.TotalVMBytes)
	}
	if k.LimitBytes != 64<<20 || k.UsageBytes != 64<<20 {
		t.Errorf("memcg limit/usage: %d/%d", k.LimitBytes, k.UsageBytes)
	}
	if !strings.HasSuffix(k.MemCG, "/gpufeed-fixture-17021") || k.MemCG != k.TaskMemCG {
		t.Errorf("memcg %q task memcg %q", k.MemCG, k.TaskMemCG)
	}
	want := bootAt.Add(669905148 * time.Microsecond)
	if !k.Wall.Equal(want) {
		t.Errorf("kill wall time %s, want boot + printk time %s", k.Wall, want)
	}
	var traps []string
	for _, ev := range events {
		if ev.Kind == Trap || ev.Kind == Segfault {
			traps = append(traps, ev.Comm+":"+ev.Trap+":"+ev.Object)
		}
	}
	wantTraps := []string{"crash:segfault:crash", "crash:general protection fault:crash", "crash:invalid opcode:crash",
		"crash:int3:crash", "python3:segfault:libc.so.6"}
	if strings.Join(traps, ",") != strings.Join(wantTraps, ",") {
		t.Errorf("traps %v, want %v", traps, wantTraps)
	}
}

func TestPublicLines(t *testing.T) {
	dir := "testdata/kmsg/public/"
	t.Run("global OOM with summary and reaper", func(t *testing.T) {
		kills := Kills(eventsOf(t, dir+"oom-global-iso-equinor-ert-7797.txt"))
		if len(kills) != 1 {
			t.Fatalf("kills: %d", len(kills))
		}
		k := kills[0]
		if k.PID != 1440763 || k.Comm != "perl" || k.Constraint != "CONSTRAINT_NONE" || !k.Reaped || k.Trigger != "pool" ||
			k.TaskMemCG != "/user.slice/user-21417.slice/user@21417.service" || k.AnonRSSBytes != 60356340<<10 {
			t.Errorf("%+v", k)
		}
	})
	t.Run("comm with parentheses", func(t *testing.T) {
		kills := Kills(eventsOf(t, dir+"oom-reaper-docker-for-linux-1001.txt"))
		if len(kills) != 2 || kills[1].Comm != "(resolved)" || kills[1].PID != 15925 || !kills[1].Reaped {
			t.Errorf("%+v", kills)
		}
	})
	t.Run("2.6.32 pid before comm", func(t *testing.T) {
		events := eventsOf(t, dir+"oom-2.6.32-emqx-356.txt")
		k, ok := first(events, OOMKill)
		if !ok || k.PID != 28364 || k.Comm != "sh" || k.UID == nil || *k.UID != 0 {
			t.Errorf("%+v", k)
		}
		kills := Kills(events)
		if len(kills) != 1 || kills[0].Score == nil || *kills[0].Score != 580 {
			t.Errorf("the selected process's score should carry to the child killed: %+v", kills)
		}
	})
	t.Run("3.10 memory cgroup", func(t *testing.T) {
		kills := Kills(eventsOf(t, dir+"oom-memcg-3.10-ltp-1080.txt"))
		if len(kills) != 2 || kills[1].Constraint != "CONSTRAINT_MEMCG" || kills[1].Comm != "memcg_test_1" || kills[1].Score == nil {
			t.Errorf("%+v", kills)
		}
	})
	t.Run("hung task with ':' in comm", func(t *testing.T) {
		ev, ok := first(eventsOf(t, dir+"hung-task-journal-thesofproject-linux-3387.txt"), HungTask)
		if !ok || ev.Comm != "kworker/u32:2" || ev.PID != 113 || ev.Blocked != 122*time.Second {
			t.Errorf("%+v", ev)
		}
	})
	t.Run("Xid with process and without", func(t *testing.T) {
		events := eventsOf(t, dir+"xid-gpud-46.txt")
		var xids []Event
		for _, ev := range events {
			if ev.Kind == GPUXid {
				xids = append(xids, ev)
			}
		}
		if len(xids) != 3 || xids[0].PID != 0 || xids[0].Comm != "" || xids[0].Xid != 13 ||
			xids[2].PID != 1797828 || xids[2].Comm != "pt_main_thread" || xids[2].Xid != 109 || xids[2].PCI != "0000:cb:00" {
			t.Errorf("%+v", xids)
		}
	})
	t.Run("Xid 79 fell off the bus", func(t *testing.T) {
		ev, ok := first(eventsOf(t, dir+"xid-79-open-gpu-kernel-modules-1151.txt"), GPUXid)
		if !ok || ev.Xid != 79 || !ev.FellOff || ev.PCI != "0000:06:00" {
			t.Errorf("%+v", ev)
		}
	})
	t.Run("segfault with no object, localised date", func(t *testing.T) {
		ev, ok := first(eventsOf(t, dir+"segfault-localised-date-vllm-35746.txt"), Segfault)
		if !ok || ev.Comm != "VLLM::EngineCor" || ev.PID != 1024641 || ev.Object != "" || ev.Error != "14" {
			t.Errorf("%+v", ev)
		}
	})
}

func TestParseMessageRejects(t *testing.T) {
	for _, msg := range []string{
		"", "Killed process", "Killed process abc (x)", "someone Killed process 1 (x) total-vm:1kB",
		"INFO: task nocolon blocked for more than 5 seconds.", "oom-kill:constraint=X", "traps: x ip:1",
		"x[abc]: segfault at 0 ip 1 sp 2 error 4",
		strings.Repeat("Killed process 1 (x) ", 400),
	} {
		if ev, ok := ParseMessage(msg); ok {
			t.Errorf("ParseMessage(%q) recognised %s", msg, ev.Kind)
		}
	}
}

func TestMalformedXidIsStillNVRM(t *testing.T) {
	ev, ok := ParseMessage("NVRM: Xid (PCI:0000:01:00): notanumber")
	if !ok || ev.Kind != NVRM {
		t.Errorf("a malformed Xid line should still count as a driver line: %+v %v", ev, ok)
	}
}

func TestSanitize(t *testing.T) {
	cases := map[string]string{
		"python3":             "python3",
		"evil\x1b[2Jname":     `evil\x1b[2Jname`,
		"a\r\nb":              `a\x0d\x0ab`,
		"bad\xffutf8":         `bad\xffutf8`,
		"名前":                  "名前",
		"line\u2028separator": `line\xe2\x80\xa8separator`,
		"para\u2029graph":     `para\xe2\x80\xa9graph`,
		"gpu\u202eexe.txt":    `gpu\xe2\x80\xaeexe.txt`,     // right-to-left override
		"a\u2066b\u2069":      `a\xe2\x81\xa6b\xe2\x81\xa9`, // isolates
		"rlm\u200f":           `rlm\xe2\x80\x8f`,
	}
	for in, want := range cases {
		if got := Sanitize(in); got != want {
			t.Errorf("Sanitize(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestTimelineRoundTrip(t *testing.T) {
	log, err := (&Reader{Path: "testdata/kmsg/local/local-6.18.kmsg", NoFallback: true, BootTime: fixedBoot}).Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	started := bootAt.Add(670 * time.Second)
	tes := ToTimeline(log, started)
	if len(tes) != 9 {
		t.Fatalf("%d timeline events", len(tes))
	}
	back := FromTimeline(tes, started)
	kills := Kills(back)
	if len(kills) != 1 || kills[0].PID != 17086 || !kills[0].Wall.Equal(bootAt.Add(669905148*time.Microsecond)) || kills[0].LimitBytes != 64<<20 {
		t.Errorf("%+v", kills)
	}
	if tes[len(tes)-1].T >= 0 || tes[len(tes)-1].PID != 17086 {
		t.Errorf("a line logged before the window has a negative T: %+v", tes[len(tes)-1])
	}
}
