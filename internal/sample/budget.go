package sample

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// The window's memory budget (Config.MaxSamples): every live thread's
// sample is held for each tick until the window is judged whole, so a
// long window of a large job grew without bound (an hour of a 1,000-thread
// job at 100 ms: 36 million samples, about 6 GB). Cut at the budget, the
// window is judged as far as it went, and says so.

// budgetNote says why the window ended at MaxSamples, after sampled of
// it, with live threads at its last tick, and how to watch longer.
func (s *Sampler) budgetNote(sampled time.Duration, live int) string {
	note := fmt.Sprintf("The window ended after %s of the %s asked: it held %s thread samples (%s every %s), the most gpufeed keeps in memory for one window.",
		safetext.Duration(roundDur(sampled)), safetext.Duration(s.cfg.Duration), thousands(s.samples), plural(live, "thread", "threads"), safetext.Duration(s.cfg.Interval))
	if longer := s.budgetInterval(live); longer > 0 {
		note += fmt.Sprintf(" A longer interval holds fewer: --interval %s would watch this job for the whole window.", safetext.Duration(longer))
	}
	return note
}

// warnBudget says, after the first tick, when live threads will fill
// MaxSamples before the window's end.
func (s *Sampler) warnBudget(live int) {
	if s.cfg.Warn == nil || live == 0 {
		return
	}
	if s.fitsBudget(live, s.cfg.Interval) {
		return
	}
	lasts := time.Duration(int64(s.cfg.MaxSamples)/int64(live)) * s.cfg.Interval
	msg := fmt.Sprintf("note: %s sampled every %s fill gpufeed's memory budget for one window (%s thread samples) in about %s: the window will end there, before the %s asked",
		plural(live, "thread", "threads"), safetext.Duration(s.cfg.Interval), thousands(s.cfg.MaxSamples), safetext.Duration(roundDur(lasts)), safetext.Duration(s.cfg.Duration))
	if longer := s.budgetInterval(live); longer > 0 {
		msg += fmt.Sprintf("; --interval %s watches it all", safetext.Duration(longer))
	}
	s.cfg.Warn(msg)
}

// budgetInterval is the shortest round interval (100 ms steps up to 1 s,
// then whole seconds) at which live threads fit MaxSamples over the whole
// window; 0 when none does that still gives the window the intervals a
// verdict needs.
func (s *Sampler) budgetInterval(live int) time.Duration {
	if live == 0 || live >= s.cfg.MaxSamples {
		return 0
	}
	need := time.Duration(float64(s.cfg.Duration) * float64(live) / float64(s.cfg.MaxSamples-live))
	step := 100 * time.Millisecond
	if need >= time.Second {
		step = time.Second
	}
	iv := max((need+step-1)/step*step, step)
	for !s.fitsBudget(live, iv) {
		iv += step
	}
	if iv <= s.cfg.Interval || s.cfg.Duration/iv < time.Duration(max(s.cfg.MinIntervals, 1)) {
		return 0
	}
	return iv
}

// fitsBudget says whether live threads sampled every iv over the whole
// window (its first tick and one every interval after) stay within MaxSamples.
func (s *Sampler) fitsBudget(live int, iv time.Duration) bool {
	return int64(live)*(int64(s.cfg.Duration/iv)+1) <= int64(s.cfg.MaxSamples)
}

// roundDur rounds a time said to a reader: to 100 ms under 10 s, else to
// the second.
func roundDur(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Second)
}

// thousands writes n with a comma every three digits.
func thousands(n int) string {
	s := strconv.Itoa(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}
