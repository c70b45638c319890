package kernlog

import (
	"strings"
	"testing"
	"time"
)

var bootAt = time.Date(2026, 7, 13, 14, 0, 0, 0, time.UTC)

func fixedBoot() (time.Time, error) { return bootAt, nil }

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
