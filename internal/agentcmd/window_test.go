package agentcmd

import (
	"testing"
	"time"
)

// TestCheckWindow holds the cases of the two window checks CheckWindow
// replaced: diagnose's and demo's --duration (top's --window went through
// it with the flag's name replaced in the message) and the agent's
// --window, each message naming the flag the user gave.
func TestCheckWindow(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		flag             string
		window, interval time.Duration
		want             string
	}{
		{"duration", 10 * s, 100 * time.Millisecond, ""},
		{"window", time.Minute, 2 * s, ""},
		{"duration", 0, 100 * time.Millisecond, "--duration 0s: want a positive duration (e.g. 10 or 10s)"},
		{"window", -s, 100 * time.Millisecond, "--window -1s: want a positive window (e.g. 10 or 10s)"},
		{"duration", 10 * s, time.Microsecond, "--interval 1µs: want at least 10ms (CPU times advance in 10 ms clock ticks; shorter intervals cost CPU and show nothing more)"},
		{"window", time.Minute, 0, "--interval 0s: want at least 10ms (CPU times advance in 10 ms clock ticks; shorter intervals cost CPU and show nothing more)"},
		{"duration", 2 * s, 10 * s, "--interval 10s is longer than --duration 2s: the window must hold at least 20 intervals for a verdict"},
		{"duration", s, 10 * time.Millisecond, "--duration 1s: a verdict needs a window of at least 2s (a shorter one cannot tell a pattern from noise); give --duration 2s or more"},
		{"window", s, 10 * time.Millisecond, "--window 1s: a verdict needs a window of at least 2s (a shorter one cannot tell a pattern from noise); give --window 2s or more"},
		{"duration", 3 * s, 500 * time.Millisecond, "--duration 3s holds 6 intervals of 500ms; a verdict needs at least 20: give a shorter --interval (at most 150ms) or a longer --duration (at least 10s)"},
		{"window", 10 * s, 2 * s, "--window 10s holds 5 intervals of 2s; a verdict needs at least 20: give a shorter --interval (at most 500ms) or a longer --window (at least 40s)"},
		{"window", 90 * s, 5 * s, "--window 1m30s holds 18 intervals of 5s; a verdict needs at least 20: give a shorter --interval (at most 4.5s) or a longer --window (at least 1m40s)"},
	} {
		got := ""
		if err := CheckWindow(c.flag, c.window, c.interval); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("CheckWindow(%s, %v, %v) = %q, want %q", c.flag, c.window, c.interval, got, c.want)
		}
	}
}
