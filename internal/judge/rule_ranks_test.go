package judge

import (
	"testing"

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
