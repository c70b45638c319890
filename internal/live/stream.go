package live

import (
	"io"
	"time"

	"github.com/gpufeed/gpufeed/internal/render"
)

// StreamRefresh is how often a stream judges its window and writes the
// intervals since: once a second, the sampler's slow tier, so that the
// lines follow the run closely at the cost of one judgement a second.
const StreamRefresh = time.Second

// Stream writes a live run's intervals as JSON lines (diagnose -o jsonl):
// every Refresh it judges the last window and writes one line per interval
// since the previous lines, each with the verdict over that window.
type Stream struct {
	W       io.Writer
	Refresh time.Duration
	// Err is the first write error (the rest of the run is not streamed).
	Err error

	win     *Window
	last    time.Time
	lastEnd int64
	index   int
}

// NewStream streams the window's intervals to w; it sets the window's
// OnTick.
func NewStream(w io.Writer, win *Window) *Stream {
	s := &Stream{W: w, Refresh: StreamRefresh, win: win, lastEnd: -1}
	win.OnTick = s.tick
	return s
}

func (s *Stream) tick(w *Window) {
	now := time.Now()
	if s.Err != nil || now.Sub(s.last) < s.Refresh || w.Ticks() < 2 {
		return
	}
	s.last = now
	s.write(w.Judge())
}

// Flush writes the intervals not yet written: call it once sampling has
// ended (from the goroutine that ran the sampler).
func (s *Stream) Flush() error {
	if s.Err == nil && s.win.Ticks() >= 2 {
		s.write(s.win.Judge())
	}
	return s.Err
}

func (s *Stream) write(r *render.Report) {
	lines, next := render.IntervalLines(r, s.lastEnd, s.index)
	for _, l := range lines {
		if err := render.WriteIntervalLine(s.W, l); err != nil {
			s.Err = err
			return
		}
	}
	s.index += len(lines)
	s.lastEnd = next
}
