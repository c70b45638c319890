package tracestats

import (
	"sort"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// StepSummary is one ProfilerStep: how long it took, how busy the GPU was
// inside it, and what the idle gaps that began in it are attributed to.
type StepSummary struct {
	Number  int   `json:"number"`
	StartNs int64 `json:"start_ns"`
	DurNs   int64 `json:"dur_ns"`
	// GPUBusyNs is device busy time inside the step's range (all devices).
	GPUBusyNs int64 `json:"gpu_busy_ns"`
	// IdleNs is the duration of the device gaps that began in the step.
	IdleNs  int64   `json:"idle_ns"`
	ByCause ByCause `json:"by_cause_ns"`
	// DataLoaderNs is the time the step's thread spent in DataLoader
	// __next__ inside the step (XProf's input time).
	DataLoaderNs int64 `json:"dataloader_ns"`
	// Syncs counts host synchronisations on the step's thread in the step.
	Syncs int `json:"syncs"`
}

// summariseSteps builds the per-step table.
func summariseSteps(s *scope, busy map[int32][]span) []StepSummary {
	t := s.t
	out := make([]StepSummary, len(s.steps))
	for i, st := range s.steps {
		ss := StepSummary{Number: st.Number, StartNs: st.Start, DurNs: st.End - st.Start}
		for _, b := range busy {
			j := sort.Search(len(b), func(j int) bool { return b[j].End > st.Start })
			for ; j < len(b) && b[j].Start < st.End; j++ {
				ss.GPUBusyNs += overlap(b[j].Start, b[j].End, st.Start, st.End)
			}
		}
		out[i] = ss
	}
	// DataLoader time and sync calls, per step thread.
	for i := range t.CPU {
		c := &t.CPU[i]
		if c.Kind != trace.DataLoaderNext {
			continue
		}
		for k, st := range s.steps {
			if st.Thread == c.Thread {
				out[k].DataLoaderNs += overlap(c.Start, c.End, st.Start, st.End)
			}
		}
	}
	for i := range t.Runtime {
		r := &t.Runtime[i]
		if !r.Kind.IsSync() {
			continue
		}
		k := sort.Search(len(s.steps), func(k int) bool { return s.steps[k].Start > r.Start }) - 1
		if k >= 0 && r.Start < s.steps[k].End && s.steps[k].Thread == r.Thread {
			out[k].Syncs++
		}
	}
	return out
}
