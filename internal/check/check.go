// Package check finds the platform facts that silently starve a GPU: a PCIe
// link that negotiated less than it can, a process bound to the far NUMA
// node, a powersave governor, a 64 MiB /dev/shm, a dataset on NFS that
// retransmits. Each check is one small unit (one per file) that yields
// Outcomes: an id, a status, the evidence with units and the file it came
// from, the decision, and the seed task it comes from.
//
// Run runs them all over an injectable /proc and /sys; diagnose folds the
// failed and warned outcomes into its findings with Findings.
package check

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// Outcome is one check's conclusion about one subject, Status what it
// concluded: the shared vocabulary's (internal/finding), so that renderers
// and diagnose read them without importing the checks.
type (
	Outcome = finding.CheckOutcome
	Status  = finding.CheckStatus
)

// The statuses, as the checks name them.
const (
	OK         = finding.CheckOK
	Warn       = finding.CheckWarn
	Fail       = finding.CheckFail
	Absent     = finding.CheckAbsent
	NotVisible = finding.CheckNotVisible
	Error      = finding.CheckError
)

// Findings returns the failed and warned outcomes as findings, for diagnose.
func Findings(outcomes []Outcome) []finding.Finding {
	var out []finding.Finding
	for _, r := range outcomes {
		if r.Status == Fail || r.Status == Warn {
			out = append(out, r.Finding())
		}
	}
	return out
}

// Failed reports whether any result failed.
func Failed(outcomes []Outcome) bool {
	for _, r := range outcomes {
		if r.Status == Fail {
			return true
		}
	}
	return false
}

// Options say where and what to check.
type Options struct {
	// ProcRoot and SysRoot default to /proc and /procfs.
	ProcRoot string
	SysRoot  string
	// PID is the target process (a training or inference job); 0 checks
	// the platform only, and per-process facts (limits, /dev/shm, mounts)
	// are read for gpufeed's own process, whose view jobs started beside it
	// share.
	PID int
	// DataPath is the dataset directory, as the target names it.
	DataPath string
	// GPU is an opened driver source; nil when there is no driver, and
	// GPUNote then says why, in one line ("libnvidia-ml.so.1 not found").
	GPU     gpu.Source
	GPUNote string
	// RequireGPU makes a host without a GPU the driver answers for a
	// failure (gpu-driver): a gate for GPU nodes.
	RequireGPU bool
	// DriverSkipped says the driver was not asked for (--device none):
	// gpu-driver is then absent, not a missing driver.
	DriverSkipped bool
	// DevRoot is where device nodes are (default /dev).
	DevRoot string
	// Window separates the two readings of counters that need a rate
	// (interrupts, PCIe replays). Zero reads once and uses counts since boot.
	Window time.Duration
	// Statfs reads filesystem statistics; nil is the real statfs(2).
	Statfs procfs.StatfsFunc
	// GPUWindow holds, by GPU index, the GPU's samples over a job's window
	// when a longer run watched it (diagnose): gpu-clocks judges the clock
	// over those, not over the check's own instant.
	GPUWindow map[int][]gpu.Sample
	// TargetExited, when set, says the target (PID) has exited and only
	// its zombie is left: the per-process checks are absent with this
	// claim, the others look at the platform.
	TargetExited string
}

// Check is one registered check.
type Check struct {
	ID string
	// Title says in a few words what the check looks at.
	Title string
	run   func(*env) []Outcome
}

// Checks lists every check in report order.
func Checks() []Check { return registry }

var registry = []Check{
	pcieLinkCheck, gpuPCIeLinkCheck, gpuPCIeReplayCheck,
	gpuNUMACheck, numaAffinityCheck, numaMemoryCheck,
	cpuGovernorCheck, cpuFrequencyCheck, cpuSMTCheck, cpuCapacityCheck, cpuIsolationCheck, cpuIRQCheck,
	kernelSchedulerCheck,
	limitNofileCheck, limitMemlockCheck, limitNprocCheck, cgroupLimitsCheck, devShmCheck,
	memoryAvailableCheck, memoryDirtyCheck, memorySwapCheck, memoryTHPCheck, pressureCheck,
	dataFilesystemCheck, nfsClientCheck, nfsMountCheck,
	gpuDriverCheck, gpuPersistenceCheck, gpuECCCheck, gpuMemoryHealthCheck, gpuPowerLimitCheck, gpuClocksCheck, gpuThrottleCheck,
}

// processChecks look only at the target process: of a zombie nothing is
// left for them to read (its mount table reads EINVAL, its limits and
// placement belong to no running code).
var processChecks = map[string]bool{
	"numa-affinity": true, "numa-memory": true, "limit-nofile": true, "limit-memlock": true, "limit-nproc": true, "cgroup-limits": true,
	"dev-shm": true, "data-filesystem": true, "nfs-mount": true,
}

// Run runs every check. It reads the counters that need a rate, waits
// Window (or until ctx ends), reads them again, then judges. It never
// fails: a check that cannot read says so in its own result.
func Run(ctx context.Context, opts Options) []Outcome {
	exited, exitedPID := opts.TargetExited, opts.PID
	if exited != "" {
		opts.PID = 0 // what is left to check is the platform
	}
	e := newEnv(ctx, opts)
	e.firstReadings()
	if opts.Window > 0 {
		t := time.NewTimer(opts.Window)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
	e.secondReadings()
	var out []Outcome
	for _, c := range registry {
		if exited != "" && processChecks[c.ID] {
			out = append(out, Outcome{ID: c.ID, Status: Absent, Severity: finding.Info,
				Subject: "pid " + strconv.Itoa(exitedPID), Claim: exited, Need: "a running process: --pid of the job itself"})
			continue
		}
		out = append(out, c.outcomes(e)...)
	}
	return out
}

// outcomes runs the check and fills what its outcomes leave to it: the id,
// the seed, and the severity that goes with the status.
func (c Check) outcomes(e *env) []Outcome {
	rs := c.run(e)
	for i := range rs {
		if rs[i].ID == "" {
			rs[i].ID = c.ID
		}
		if rs[i].Severity == finding.Info {
			rs[i].Severity = defaultSeverity(rs[i].Status)
		}
	}
	return rs
}

func defaultSeverity(s Status) finding.Severity {
	switch s {
	case Fail:
		return finding.Critical
	case Warn:
		return finding.Warning
	}
	return finding.Info
}

// readFailure turns a read error into an absent, not-visible or error
// result. absentNeed and deniedNeed say what would let the check see.
func readFailure(subject, what, source string, err error, absentNeed, deniedNeed string) Outcome {
	switch {
	case procfs.IsAbsent(err):
		return Outcome{Status: Absent, Subject: subject, Claim: what + ": " + source + " absent", Need: absentNeed}
	case procfs.IsDenied(err):
		return Outcome{Status: NotVisible, Subject: subject, Claim: what + ": " + source + " not readable", Need: deniedNeed}
	}
	return Outcome{Status: Error, Subject: subject, Claim: fmt.Sprintf("%s: %v", what, err),
		Need: "a well-formed " + source + "; report this to gpufeed with the file attached"}
}

// needPtrace is what lets a user read another process's fds, numa_maps, root.
const needPtrace = "run as the job's user or as root (CAP_SYS_PTRACE), and outside a stricter ptrace_scope"
