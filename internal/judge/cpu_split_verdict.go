package judge

import "github.com/gpufeed/gpufeed/internal/finding"

// applyCPUSplit gives the class the launch thread's CPU profile names
// (launch-thread-cpu-split) the idle time /proc could only call submission
// or spin-or-submit: the profile saw what the thread did in that time.
// Without a split finding the attribution is left as it is.
func applyCPUSplit(in *Input, fs []finding.Finding) {
	var split *finding.Finding
	for i := range fs {
		if fs[i].ID == "launch-thread-cpu-split" {
			split = &fs[i]
		}
	}
	if split == nil || split.Supports == "" || in.Attr.Share == nil {
		return
	}
	share := make(map[finding.Class]float64, len(in.Attr.Share))
	for c, v := range in.Attr.Share {
		share[c] = v
	}
	moved := share[finding.SubmissionBound] + share[SpinOrSubmit]
	delete(share, finding.SubmissionBound)
	delete(share, SpinOrSubmit)
	share[split.Supports] += moved
	in.Attr.Share = share
}

// splitCause is the split finding when it names c and c's own cause
// finding is absent (a spinning sync has no /proc finding of its own).
func splitCause(c finding.Class, fs []finding.Finding) *finding.Finding {
	for i := range fs {
		if fs[i].ID == "launch-thread-cpu-split" && fs[i].Supports == c {
			return &fs[i]
		}
	}
	return nil
}
