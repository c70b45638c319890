package kernlog

import (
	"errors"
	"strings"
	"testing"
	"time"
)

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
	if e := ParseJournalLine("[  518.050606] host kernel: Out of memory: x"); e.Message != "Out of memory: x" || e.Mono != 518050606*time.Microsecond {
		t.Errorf("journal line: %+v", e)
	}
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
