package kernlog

import (
	"time"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// ToTimeline turns the recognised entries of a log into timeline events:
// T is the entry's wall time relative to started (negative for lines logged
// before the window), PID the process the line names, Text the raw message
// (re-recognised with FromTimeline, so recordings keep the kernel's own words).
// Entries with no wall time are left out.
func ToTimeline(log *Log, started time.Time) []timeline.Event {
	var out []timeline.Event
	for _, e := range log.Entries {
		ev, ok := ParseEntry(e)
		if !ok || e.Wall.IsZero() {
			continue
		}
		out = append(out, timeline.Event{T: e.Wall.Sub(started).Nanoseconds(), Kind: timeline.EventKernelLog, PID: ev.PID, Text: e.Message})
	}
	return out
}
