package judge

import "github.com/gpufeed/gpufeed/internal/finding"

func init() {
	register(Rule{ID: "platform-checks", Title: "gpufeed check's warnings and failures for the target",
		// Sources: the platform checks of gpufeed check, each with its own
		Run: runChecks, EmitsChecks: true})
}

// measuredOverWindow lists check IDs whose fact diagnose measures itself
// over the window: the check's reading (a 60 s average taken before or after
// the window) is left out, the window's own measurement speaks instead.
var measuredOverWindow = map[string]bool{
	"pressure": true, // PSI avg60: diagnose samples /proc/pressure every second
}

// FoldsCheck reports whether diagnose reports check id's warnings and
// failures among its findings (a fact it measures over its own window it
// does not).
func FoldsCheck(id string) bool { return !measuredOverWindow[id] }

// runChecks folds the platform checks that ran at the end of the window
// (recorded in the timeline, so a recording reproduces them) into the
// findings. A check supporting a class carries the verdict with it when the
// class is chosen (a downgraded PCIe link for transfer-bound).
func runChecks(in *Input) []finding.Finding {
	c := in.Timeline.Meta.Checks
	if c == nil {
		return nil
	}
	var out []finding.Finding
	for _, f := range c.Findings {
		if measuredOverWindow[f.ID] {
			continue
		}
		out = append(out, f)
	}
	return out
}
