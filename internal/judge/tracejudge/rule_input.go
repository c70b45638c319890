package tracejudge

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge/thresholds"
)

// ruleHostWaitDataLoader: the GPU was idle while the launching thread
// waited in DataLoader __next__. A trace cannot tell CPU preprocessing from
// storage reads (live diagnose's input-pipeline-busy and
// input-waits-on-storage), so this is its own finding. Sources: 002
// Checklist C; FAQ 2.
func ruleHostWaitDataLoader(in *Input) *finding.Finding {
	sh, b := in.Shares, in.ByCause
	if sh.Input < thresholds.ModerateSharePct {
		return nil
	}
	return &finding.Finding{
		Severity: in.sev(sh.Input),
		Claim:    fmt.Sprintf("The GPU waits for the DataLoader: %.1f %% of the time (%.1f ms) the launching thread was inside DataLoader __next__ while the GPU was idle.", sh.Input, ms(b[tracestats.CauseDataLoader])),
		Evidence: []finding.Evidence{
			in.ctx.ev("share of GPU time lost to the input pipeline", sh.Input, "%", ""),
			in.ctx.ev("idle while the launching thread waited in DataLoader __next__", ms(b[tracestats.CauseDataLoader]), "ms", "enumerate(DataLoader)#…__next__"),
		},
		Decision: "Feed the loader faster: raise DataLoader num_workers (until cores or storage saturate), persistent_workers=True, prefetch_factor, pin_memory=True; cache decoded samples. A trace cannot tell CPU preprocessing from storage reads: run gpufeed diagnose live to see which.",
		Supports: finding.Preprocessing,
	}
}

// ruleInputBoundSteps: XProf's input-bound step classification on the
// median step. Sources: 002 Checklist C.
func ruleInputBoundSteps(in *Input) *finding.Finding {
	med, n := medianInputPct(in.Rank.Steps)
	if n == 0 || med < thresholds.ModerateSharePct {
		return nil
	}
	level := "moderately"
	if med >= thresholds.HighSharePct {
		level = "highly"
	}
	return &finding.Finding{
		Severity: in.sev(med),
		Claim:    fmt.Sprintf("Steps are %s input-bound: the median step spends %.1f %% of its time in DataLoader __next__ (XProf: 5 %% moderately, 20 %% highly).", level, med),
		Evidence: []finding.Evidence{
			in.ctx.ev("median share of step time in DataLoader __next__", med, "%", "ProfilerStep#N, enumerate(DataLoader)#…__next__"),
			in.ctx.ev("steps measured", float64(n), "", "ProfilerStep#N"),
		},
		Decision: "More DataLoader workers, prefetching and pinned memory; overlap loading with the previous step.",
		Supports: finding.Preprocessing,
	}
}
