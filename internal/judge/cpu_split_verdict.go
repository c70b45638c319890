package judge

import (
	"slices"

	"github.com/gpufeed/gpufeed/internal/finding"
)

// applyCPUSplit gives the class the launch thread's CPU profile names
// (launch-thread-cpu-split) the idle time /proc could only call submission
// or spin-or-submit: the profile saw what the thread did in that time.
// Without a split finding the attribution is left as it is.
//
// A CPU profile that shows the thread launching under a tenth of its CPU
// and names no class (profileVeto) vetoes submission-bound: that idle time
// then goes unexplained, and the verdict says what the profile saw.
func applyCPUSplit(in *Input, fs []finding.Finding) {
	split := splitFinding(fs)
	if split == nil && profileVeto(fs) != nil {
		split = &finding.Finding{Supports: Unexplained}
	}
	if split == nil || in.Attribution.Share == nil {
		return
	}
	share := make(map[finding.Class]float64, len(in.Attribution.Share))
	for c, v := range in.Attribution.Share {
		share[c] = v
	}
	moved := share[finding.SubmissionBound] + share[SpinOrSubmit]
	delete(share, finding.SubmissionBound)
	delete(share, SpinOrSubmit)
	share[split.Supports] += moved
	in.Attribution.Share = share
	// The intervals whose idle went mostly to those go to the class too:
	// they carry it (the confidence counts them).
	mostly := make(map[finding.Class]int, len(in.Attribution.Mostly))
	for c, n := range in.Attribution.Mostly {
		if c == finding.SubmissionBound || c == SpinOrSubmit {
			c = split.Supports
		}
		mostly[c] += n
	}
	in.Attribution.Mostly = mostly
	carry := make(map[finding.Class]float64, len(in.Attribution.Carry))
	for c, k := range in.Attribution.Carry {
		if c == finding.SubmissionBound || c == SpinOrSubmit {
			c = split.Supports
		}
		if c != Unexplained {
			carry[c] += k
		}
	}
	in.Attribution.Carry = carry
	cause := slices.Clone(in.Attribution.Cause)
	for i, c := range cause {
		if c == finding.SubmissionBound || c == SpinOrSubmit {
			cause[i] = split.Supports
		}
	}
	in.Attribution.Cause = cause
	if split.Supports != finding.SubmissionBound {
		in.Attribution.Descheduled = 0
	}
}

// profileVeto is the launch thread's CPU split finding when it names no
// class: its profile shows launch calls under a tenth of its CPU, so the
// thread was not submitting work, and nothing else dominated.
func profileVeto(fs []finding.Finding) *finding.Finding {
	for i := range fs {
		if fs[i].ID == "launch-thread-cpu-split" && fs[i].Supports == "" {
			return &fs[i]
		}
	}
	return nil
}

// splitCause is the split finding when it names c and c's own cause
// finding is absent (a spinning sync has no /proc finding of its own).
func splitCause(c finding.Class, fs []finding.Finding) *finding.Finding {
	if f := splitFinding(fs); f != nil && f.Supports == c {
		return f
	}
	return nil
}

// splitFinding is the finding that splits the launch thread's time on a
// CPU: its CPU profile's (launch-thread-cpu-split), else its driver calls'
// (launch-thread-driver-calls: the time inside syncs, measured from entry
// to return), or nil.
func splitFinding(fs []finding.Finding) *finding.Finding {
	var byDriver *finding.Finding
	for i := range fs {
		switch fs[i].ID {
		case "launch-thread-cpu-split":
			if fs[i].Supports != "" {
				return &fs[i]
			}
		case "launch-thread-driver-calls":
			if byDriver == nil && fs[i].Supports != "" {
				byDriver = &fs[i]
			}
		}
	}
	return byDriver
}
