package kernlog

import (
	"time"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// FromTimeline re-parses the kernel log events of a timeline, with their
// wall time (started + T).
func FromTimeline(events []timeline.Event, started time.Time) []Event {
	var out []Event
	for _, te := range events {
		if te.Kind != timeline.EventKernelLog {
			continue
		}
		ev, ok := ParseMessage(te.Text)
		if !ok {
			continue
		}
		ev.Wall = started.Add(time.Duration(te.T))
		out = append(out, ev)
	}
	return out
}
