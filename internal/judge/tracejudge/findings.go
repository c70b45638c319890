package tracejudge

import (
	"fmt"
	"slices"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// evidenceCtx carries what every piece of evidence cites: the window it
// covers and the file it came from.
type evidenceCtx struct {
	window string
	file   string
}

func (c evidenceCtx) ev(what string, v float64, unit, events string) finding.Evidence {
	src := c.file
	if events != "" {
		src += ": " + events
	}
	return finding.Evidence{What: what, Value: round3(v), Unit: unit, Window: c.window, Source: src}
}

// bytesCopied is the bytes the copies moved, or "not recorded" when the
// trace holds no byte counts for them (0 bytes for copies that ran is not
// a measurement).
func (c evidenceCtx) bytesCopied(n int64, events string) finding.Evidence {
	if n <= 0 {
		return c.text("bytes copied", "not recorded", events)
	}
	return c.ev("bytes copied", float64(n), "B", events)
}

func (c evidenceCtx) text(what, text, events string) finding.Evidence {
	src := c.file
	if events != "" {
		src += ": " + events
	}
	return finding.Evidence{What: what, Text: text, Window: c.window, Source: src}
}

func round3(v float64) float64 {
	if v >= 1000 || v <= -1000 {
		return float64(int64(v*10+0.5*sign(v))) / 10
	}
	return float64(int64(v*1000+0.5*sign(v))) / 1000
}

func sign(v float64) float64 {
	if v < 0 {
		return -1
	}
	return 1
}

func ms(ns int64) float64 { return float64(ns) / 1e6 }

// windowText describes the analysed window: the steps and the GPU span.
func windowText(r *RankReport) string {
	span := fmt.Sprintf("%.3f s of GPU activity", float64(r.Attribution.SpanNs)/1e9)
	if n := len(r.Steps); n > 0 {
		first, last := r.Steps[0].Number, r.Steps[n-1].Number
		if n == 1 {
			return fmt.Sprintf("ProfilerStep#%d, %s", first, span)
		}
		return fmt.Sprintf("%d steps (ProfilerStep#%d–#%d), %s", n, first, last, span)
	}
	return span
}

// medianInputPct returns the median over steps of the DataLoader share of
// step time, and the number of steps with a DataLoader range.
// durText writes a duration in the unit that suits it: microseconds below
// a millisecond, milliseconds above.
func durText(ns int64) string {
	if ns < 1e6 {
		return fmt.Sprintf("%.0f us", float64(ns)/1e3)
	}
	return fmt.Sprintf("%.1f ms", ms(ns))
}

// shortName trims a long kernel name (a C++ signature) to n runes.
func shortName(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func medianInputPct(steps []tracestats.StepSummary) (float64, int) {
	var v []float64
	for _, s := range steps {
		if s.DurNs > 0 && s.DataLoaderNs > 0 {
			v = append(v, 100*float64(s.DataLoaderNs)/float64(s.DurNs))
		}
	}
	if len(v) == 0 {
		return 0, 0
	}
	slices.Sort(v)
	return tracestats.Quantile(v, 0.5), len(v)
}

func medianSyncs(steps []tracestats.StepSummary) (int, int) {
	if len(steps) == 0 {
		return 0, 0
	}
	v := make([]int, len(steps))
	for i, s := range steps {
		v[i] = s.Syncs
	}
	slices.Sort(v)
	return v[len(v)/2], len(v)
}

func maxQueue(q []tracestats.QueueLength) tracestats.QueueLength {
	var best tracestats.QueueLength
	for _, x := range q {
		if x.Max > best.Max {
			best = x
		}
	}
	return best
}
