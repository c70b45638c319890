package finding

import "sort"

// VerdictFirst orders findings as every report presents them: the
// verdict's own first, in the order its Because lists them, then the rest
// by severity, most severe first; findings that tie keep the order their
// rules drew them in. Live diagnose, recordings and traces all use it.
func VerdictFirst(v *Verdict, fs []Finding) {
	because := map[string]int{}
	if v != nil {
		for i, id := range v.Because {
			if _, ok := because[id]; !ok {
				because[id] = i + 1
			}
		}
	}
	sort.SliceStable(fs, func(i, j int) bool {
		bi, bj := because[fs[i].ID], because[fs[j].ID]
		switch {
		case bi != 0 && bj != 0:
			return bi < bj
		case bi != 0 || bj != 0:
			return bi != 0
		}
		return fs[i].Severity > fs[j].Severity
	})
}
