package check

import (
	"fmt"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

const (
	// nofileSoftWarnBelow: seed 004's DataLoader hit "Too many open files"
	// under the 1024 default soft limit (hard 4096); PyTorch's
	// file_descriptor sharing strategy holds one descriptor per shared
	// tensor in flight, so a soft limit under 4096 is the seed's failure
	// waiting to happen.
	nofileSoftWarnBelow = 4096
	// nofileUsedFailFraction: a process already holding 90% of its soft
	// limit fails at the next burst of opens.
	nofileUsedFailFraction = 0.9
)

var limitNofileCheck = Check{
	ID:    "limit-nofile",
	Title: "Open files limit (soft/hard) and descriptors in use",
	// Sources: 004 File descriptor exhaustion
	run: runLimitNofile,
}

func runLimitNofile(e *env) []Outcome {
	return limitResult(e, procfs.LimitOpenFiles, func(l procfs.Limit, ev []finding.Evidence) Outcome {
		used := -1
		fdSrc := procFile(pidDir(e.opts.PID), "fd")
		if fds, err := e.targetFDs(); err == nil {
			used = fds.Total
			ev = append(ev, num("open descriptors", float64(fds.Total), "files", fdSrc))
		} else if procfs.IsDenied(err) {
			ev = append(ev, text("open descriptors", "not visible: "+needPtrace, fdSrc))
		}
		return judgeNofile(l, used, ev)
	})
}

func judgeNofile(l procfs.Limit, used int, ev []finding.Evidence) Outcome {
	const fix = "Raise the soft limit before launch (ulimit -n 65536, LimitNOFILE= in the unit, /etc/security/limits.conf) and " +
		"read data through mmap/Arrow/shards rather than one descriptor per sample."
	if used >= 0 && l.Soft != procfs.Unlimited && float64(used) >= nofileUsedFailFraction*float64(l.Soft) {
		return Outcome{Status: Fail, Evidence: ev, Supports: finding.Stalled,
			Claim:    fmt.Sprintf("%d descriptors open of a soft limit of %d: the next opens fail with EMFILE", used, l.Soft),
			Decision: fix}
	}
	if l.Soft < nofileSoftWarnBelow {
		return Outcome{Status: Warn, Evidence: ev,
			Claim:    fmt.Sprintf("open files soft limit %d (hard %s): DataLoader workers hit \"Too many open files\" at this size", l.Soft, limitString(l.Hard)),
			Decision: fix}
	}
	return Outcome{Status: OK, Evidence: ev, Claim: fmt.Sprintf("open files soft limit %s", limitString(l.Soft))}
}
