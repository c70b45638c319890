package judge

import (
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func TestStragglerNamedOnlyWhenAllOthersWait(t *testing.T) {
	rv := func(rank, state string) RankView { return RankView{Rank: rank, State: state} }
	for _, c := range []struct {
		name  string
		ranks []RankView
		want  string
	}{
		{"busy one, others wait", []RankView{rv("0", RankCollective), rv("1", RankBusy), rv("2", RankCollective)}, "1"},
		{"sleeping one", []RankView{rv("0", RankCollective), rv("1", RankSleeps)}, "1"},
		{"data-starved one", []RankView{rv("0", RankData), rv("1", RankCollective)}, "0"},
		{"two busy", []RankView{rv("0", RankBusy), rv("1", RankBusy), rv("2", RankCollective)}, ""},
		{"all wait (a hang)", []RankView{rv("0", RankCollective), rv("1", RankCollective)}, ""},
		{"a dead rank", []RankView{rv("0", RankCollective), rv("1", RankDead), rv("2", RankBusy)}, ""},
		{"mixed, unread", []RankView{rv("0", RankCollective), rv("1", RankMixed)}, ""},
		{"mixed, few peer waits", []RankView{{Rank: "0", State: RankCollective, Readings: 4, Peer: 4}, {Rank: "1", State: RankMixed, Readings: 4, Peer: 2}}, "1"},
		{"mixed, as many peer waits", []RankView{{Rank: "0", State: RankCollective, Readings: 4, Peer: 3}, {Rank: "1", State: RankMixed, Readings: 4, Peer: 2}}, ""},
	} {
		got := ""
		if s := Straggler(c.ranks); s != nil {
			got = s.Rank
		}
		if got != c.want {
			t.Errorf("%s: straggler %q, want %q", c.name, got, c.want)
		}
	}
}

func TestRankWait(t *testing.T) {
	for _, c := range []struct {
		b    timeline.Blocked
		want string
	}{
		{timeline.Blocked{Syscall: "futex"}, "peer"},
		{timeline.Blocked{Syscall: "recvfrom", On: "socket:[12]"}, "peer"},
		{timeline.Blocked{Syscall: "read", On: "pipe:[12]"}, "data"},
		{timeline.Blocked{Syscall: "poll", On: "pipe:[12]"}, "data"},
		{timeline.Blocked{Syscall: "clock_nanosleep"}, "timer"},
		{timeline.Blocked{Syscall: "read", On: "/data/x"}, ""},
		{timeline.Blocked{Wchan: "futex_wait_queue"}, "peer"},
		{timeline.Blocked{Syscall: "poll"}, "peer"},
	} {
		if got := rankWait(&c.b, false); got != c.want {
			t.Errorf("%+v: %q, want %q", c.b, got, c.want)
		}
	}
}

func TestRankWaitPollWithWorkersIsData(t *testing.T) {
	if got := rankWait(&timeline.Blocked{Syscall: "poll"}, true); got != "data" {
		t.Errorf("poll in a rank with workers: %q, want data", got)
	}
	if got := rankWait(&timeline.Blocked{Syscall: "futex"}, true); got != "peer" {
		t.Errorf("futex in a rank with workers: %q, want peer", got)
	}
}

// Who woke each rank's launch thread, from the waker graph: another rank
// (any of its threads), its own threads, interrupts, a process outside the
// ranks; and the rank that woke its peers most. None without the graph.
func TestRankWakersEvidence(t *testing.T) {
	rank := func(r string, pid, tid int) RankView {
		return RankView{Rank: r, Proc: &derive.Proc{Key: timeline.ProcKey{PID: pid}}, Thread: &derive.Thread{Key: timeline.ThreadKey{TID: tid}, PID: pid}}
	}
	ranks := []RankView{rank("0", 100, 100), rank("1", 200, 200), rank("2", 300, 300)}
	tl := &timeline.Timeline{}
	tl.Meta.Tiers.Slow = timeline.Duration(1e9)
	in := &Input{Timeline: tl, View: &derive.View{WindowNS: 10e9}}
	if ev := in.rankWakersEvidence(ranks); ev != nil {
		t.Fatalf("without a waker graph: %+v", ev)
	}
	tl.Meta.Wakers = &timeline.Wakers{SampledNS: 1e9, Edges: []timeline.WakeEdge{
		{Wakee: 100, Waker: 201, WakerPID: 200, Count: 90},  // rank 1's thread
		{Wakee: 100, Waker: 0, Count: 10},                   // an interrupt
		{Wakee: 300, Waker: 200, WakerPID: 200, Count: 40},  // rank 1
		{Wakee: 300, Waker: 301, WakerPID: 300, Count: 50},  // its own
		{Wakee: 300, Waker: 999, WakerPID: 999, Count: 10},  // outside
		{Wakee: 200, Waker: 100, WakerPID: 100, Count: 5},   // rank 0
		{Wakee: 201, Waker: 100, WakerPID: 100, Count: 500}, // not a launch thread
	}}
	ev := in.rankWakersEvidence(ranks)
	if len(ev) != 1 {
		t.Fatalf("evidence %+v", ev)
	}
	wantWhat := "who woke each rank's launch thread (205 wake-ups in the 1s they were counted, 205 a second)"
	wantText := "rank 0's by rank 1 90 times (90%), interrupts on an idle CPU 10 times (10%); rank 1's by rank 0 5 times (100%); " +
		"rank 2's by its own threads 50 times (50%), rank 1 40 times (40%); rank 1 woke its peers most: 130 of the 135 wake-ups one rank gave another"
	if ev[0].What != wantWhat || ev[0].Text != wantText {
		t.Errorf("got\n%s: %s\nwant\n%s: %s", ev[0].What, ev[0].Text, wantWhat, wantText)
	}
	if !strings.Contains(ev[0].Window, "of the window (10s), a tick in each 1s") {
		t.Errorf("window %q", ev[0].Window)
	}
}
