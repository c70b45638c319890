package tracejudge

import (
	"testing"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
)

// TestSameCauseSameIDLiveAndTrace: a class's cause finding has the live
// judge's ID in a trace too, except where the trace measures a different
// thing (CauseID says which and why); every trace cause is a registered
// trace rule.
func TestSameCauseSameIDLiveAndTrace(t *testing.T) {
	differs := map[finding.Class]bool{finding.Preprocessing: true, finding.TransferBound: true}
	rules := map[string]bool{}
	for _, r := range Rules() {
		rules[r.ID] = true
	}
	for c, id := range CauseID {
		if !rules[id] {
			t.Errorf("%s: cause %s is no trace rule", c, id)
		}
		if live := judge.CauseID[c]; live != id && !differs[c] {
			t.Errorf("%s: trace cause %s, live cause %s: the same cause must carry the same id", c, id, live)
		}
	}
	if !rules[judge.CauseID[finding.TransferBound]] {
		t.Errorf("the live transfer cause %s is no trace rule", judge.CauseID[finding.TransferBound])
	}
}
