package frozen

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// nameGILHolders adds to a gil-contention finding which threads held the
// GIL, from the Python stacks sampled over the window (diagnose
// --py-stacks), with what each ran most while holding it: the question
// `py-spy top --gil` answers.
func nameGILHolders(v *view, pid int, f *finding.Finding) {
	var top *profile.PySamples
	for _, e := range v.tl.Events {
		if e.Kind == timeline.EventPySamples && e.PID == pid {
			if t, err := profile.ParsePySamples(e.Text); err == nil {
				top = &t
			}
		}
	}
	if top == nil || top.Rounds == 0 {
		return
	}
	type holder struct {
		th    profile.PySampleThread
		share float64
	}
	var hs []holder
	for _, th := range top.Threads {
		if s := float64(th.GIL) / float64(top.Rounds); 100*s >= thresholds.GILHolderRoundsPct {
			hs = append(hs, holder{th, s})
		}
	}
	sort.SliceStable(hs, func(i, j int) bool { return hs[i].share > hs[j].share })
	if len(hs) == 0 {
		return
	}
	window := fmt.Sprintf("%d rounds at %.0f Hz over %.1f s", top.Rounds, top.RateHz, top.Seconds)
	var names []string
	for i, h := range hs {
		what := "its samples"
		if fs := h.th.FunctionShares(); len(fs) > 0 {
			// the innermost function it was seen in most
			best := fs[0]
			for _, x := range fs {
				if x.Own > best.Own {
					best = x
				}
			}
			what = best.Function + " (" + best.File + ")" // escaped by the renderers (gil.go)
		}
		who := v.threadNameRaw(h.th.TID)
		f.Evidence = append(f.Evidence, finding.Evidence{What: "rounds in which " + who + " held the GIL, mostly in " + what,
			Value: round(h.share*100, 1), Unit: "%", Window: window, Source: "sampled Python stacks (" + top.Reader + ")"})
		if i < 3 {
			names = append(names, fmt.Sprintf("%s (%.0f %%, in %s)", who, h.share*100, what))
		}
	}
	f.Claim += "; the GIL was held by " + strings.Join(names, ", ")
	f.Decision = "The GIL holders are " + strings.Join(names, ", ") + ": move that work out of Python threads, into DataLoader worker processes or other processes, or into calls that release the GIL (NumPy, torch operations on whole tensors)."
}
