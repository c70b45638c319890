package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// limitResult reads one limit of the target and hands it to judge.
func limitResult(e *env, name string, judge func(l procfs.Limit, ev []finding.Evidence) Outcome) []Outcome {
	subj := e.subjectPID()
	src := procFile(pidDir(e.opts.PID), "limits")
	limits, err := e.targetLimits()
	if err != nil {
		return []Outcome{readFailure(subj, "resource limits", src, err, "a running process: check the PID", needPtrace)}
	}
	l, ok := limits[name]
	if !ok {
		return []Outcome{{Status: Absent, Subject: subj, Claim: fmt.Sprintf("%q not in %s", name, src), Need: "a kernel that lists it"}}
	}
	ev := []finding.Evidence{limitEv(name+" (soft)", l.Soft, l.Unit, src), limitEv(name+" (hard)", l.Hard, l.Unit, src)}
	r := judge(l, ev)
	r.Subject = subj
	return []Outcome{r}
}

func limitEv(what string, v uint64, unit, src string) finding.Evidence {
	if v == procfs.Unlimited {
		return text(what, "unlimited", src)
	}
	if unit == "bytes" {
		return bytesEv(what, v, src)
	}
	return num(what, float64(v), unit, src)
}

func limitString(v uint64) string {
	if v == procfs.Unlimited {
		return "unlimited"
	}
	return fmt.Sprint(v)
}
