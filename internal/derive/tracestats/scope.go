package tracestats

import (
	"cmp"
	"slices"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// Step is one ProfilerStep#N range.
type Step struct {
	Number     int   `json:"number"`
	Start, End int64 `json:"-"`
	Thread     uint32
}

// scope is the part of a trace every analysis reads. It follows HTA's
// align_and_filter_trace so the numbers agree: when the trace holds at least
// two distinct ProfilerStep#N names, the last step is dropped (the profiler
// usually stops inside it) together with every CPU event that starts at or
// after it and every GPU operation not launched by a CPU event kept.
// With fewer steps nothing is dropped, nor in Nsight Systems reports, whose
// rule totals are computed over the whole report.
type scope struct {
	t *trace.Trace
	// filtered reports whether the last step was cut off.
	filtered bool
	// cut: CPU events and runtime calls starting before cut are kept (at or
	// before, when inclusive).
	cut       int64
	inclusive bool
	// gpu marks GPU work (kernels, copies, memsets) in scope.
	gpu []bool
	// steps in scope, sorted by start.
	steps []Step
	// droppedSteps counts steps outside the scope.
	droppedSteps int
	// Start and End bound the GPU work in scope (first start, last end).
	start, end int64
	// work counts GPU operations in scope.
	work int
}

func newScope(t *trace.Trace, includeLastStep, dropLastStep bool) *scope {
	s := &scope{t: t, gpu: make([]bool, len(t.GPU))}
	var all []Step
	names := map[trace.NameID]bool{}
	for i := range t.CPU {
		c := &t.CPU[i]
		if c.Kind != trace.Step {
			continue
		}
		names[c.Name] = true
		all = append(all, Step{Number: trace.StepNumber(t.Name(c.Name)), Start: c.Start, End: c.End, Thread: c.Thread})
	}
	slices.SortFunc(all, func(a, b Step) int { return cmp.Compare(a.Start, b.Start) })
	if dropLastStep && len(names) >= 2 {
		s.filtered = true
		s.inclusive = includeLastStep
		for _, st := range all {
			if includeLastStep {
				s.cut = max(s.cut, st.End)
			} else {
				s.cut = max(s.cut, st.Start)
			}
		}
	}
	for _, st := range all {
		if s.cpuIn(st.Start) {
			s.steps = append(s.steps, st)
		} else {
			s.droppedSteps++
		}
	}
	s.start, s.end = -1, -1
	for i := range t.GPU {
		g := &t.GPU[i]
		if !g.Kind.IsWork() {
			continue
		}
		if s.filtered {
			switch {
			case g.Launch >= 0:
				if !s.cpuIn(t.Runtime[g.Launch].Start) {
					continue
				}
			case g.AmbiguousLaunch:
				// Its launch is unknown (the correlation id is not unique),
				// not absent: place it by its own start.
				if !s.cpuIn(g.Start) {
					continue
				}
			default:
				continue
			}
		}
		s.gpu[i] = true
		s.work++
		if s.start < 0 || g.Start < s.start {
			s.start = g.Start
		}
		if g.End > s.end {
			s.end = g.End
		}
	}
	return s
}

// cpuIn reports whether a CPU event or runtime call starting at ts is in scope.
func (s *scope) cpuIn(ts int64) bool {
	if !s.filtered {
		return true
	}
	if s.inclusive {
		return ts <= s.cut
	}
	return ts < s.cut
}
