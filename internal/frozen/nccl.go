package frozen

import (
	"sort"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// NCCL and torch.distributed settings that decide whether a dead or stuck
// peer makes the others fail loudly or wait forever (seed 004, "The NCCL
// hang"). Only allowlisted variables are read (internal/timeline ProcInfo.Env).
//
// PyTorch's own defaults, from ProcessGroupNCCL: TORCH_NCCL_ASYNC_ERROR_HANDLING
// defaults to 3 (tear the process down) in current releases and still reads
// the pre-2.2 name NCCL_ASYNC_ERROR_HANDLING as a deprecated alias;
// TORCH_NCCL_DUMP_ON_TIMEOUT and TORCH_NCCL_TRACE_BUFFER_SIZE default to off
// and 0 in older releases, on and 2000 in current ones. The collective
// timeout is init_process_group(timeout=...), not an environment variable.
const (
	envAsyncNew   = "TORCH_NCCL_ASYNC_ERROR_HANDLING"
	envAsyncOld   = "NCCL_ASYNC_ERROR_HANDLING"
	envDump       = "TORCH_NCCL_DUMP_ON_TIMEOUT"
	envTrace      = "TORCH_NCCL_TRACE_BUFFER_SIZE"
	envMonitoring = "TORCH_NCCL_ENABLE_MONITORING"
	envHeartbeat  = "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC"
	envNCCLTimout = "NCCL_TIMEOUT"
)

// NCCLEnvAllowlist names the variables these checks need the sampler's
// environment allowlist to keep.
var NCCLEnvAllowlist = []string{envAsyncNew, envAsyncOld, envDump, envTrace, envMonitoring, envHeartbeat, envNCCLTimout,
	"TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT", "NCCL_DEBUG",
	"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK"}

// isRankProcess says a process is a rank of a distributed job.
func isRankProcess(p *timeline.ProcInfo) bool {
	_, _, ok := rank(p)
	return ok
}

func truthy(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// ncclCheck is one problem found in one rank's environment.
type ncclCheck struct {
	id       string
	severity finding.Severity
	claim    string
	decision string
	vars     [][2]string // name, value ("unset" when absent)
}

func checkNCCLEnv(env map[string]string, stalled bool) []ncclCheck {
	get := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	show := func(k string) [2]string {
		if v, ok := get(k); ok {
			return [2]string{k, v}
		}
		return [2]string{k, "unset"}
	}
	var out []ncclCheck
	newV, newSet := get(envAsyncNew)
	oldV, oldSet := get(envAsyncOld)
	switch {
	case oldSet && !newSet:
		out = append(out, ncclCheck{id: "nccl-async-error-handling-old-name", severity: finding.Warning,
			claim:    "NCCL async error handling is set under its old name NCCL_ASYNC_ERROR_HANDLING, renamed TORCH_NCCL_ASYNC_ERROR_HANDLING in PyTorch 2.2",
			decision: "Rename it TORCH_NCCL_ASYNC_ERROR_HANDLING: current PyTorch reads the old name only as a deprecated alias, and a release or tool that drops it leaves error handling at its default, quietly.",
			vars:     [][2]string{show(envAsyncOld), show(envAsyncNew)}})
	case oldSet && newSet && strings.TrimSpace(oldV) != strings.TrimSpace(newV):
		out = append(out, ncclCheck{id: "nccl-async-error-handling-conflict", severity: finding.Info,
			claim:    "NCCL async error handling is set under both names with different values; the new name wins",
			decision: "Remove NCCL_ASYNC_ERROR_HANDLING and keep TORCH_NCCL_ASYNC_ERROR_HANDLING.",
			vars:     [][2]string{show(envAsyncNew), show(envAsyncOld)}})
	}
	effective, set := newV, newSet
	if !newSet {
		effective, set = oldV, oldSet
	}
	switch {
	case set && strings.TrimSpace(effective) == "0":
		out = append(out, ncclCheck{id: "nccl-async-error-handling-off", severity: finding.Warning,
			claim:    "NCCL async error handling is off (0): a failed or timed-out collective leaves the process waiting instead of failing",
			decision: "Set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 (abort the communicator and tear the process down) so a dead peer turns into a loud error, not a silent hang.",
			vars:     [][2]string{show(envAsyncNew), show(envAsyncOld)}})
	case !set:
		sev := finding.Info
		if stalled {
			sev = finding.Warning
		}
		out = append(out, ncclCheck{id: "nccl-async-error-handling-unset", severity: sev,
			claim:    "NCCL async error handling is not set: whether a dead peer makes the others fail or hang depends on the installed PyTorch's default",
			decision: "Set TORCH_NCCL_ASYNC_ERROR_HANDLING=1 explicitly: current PyTorch defaults to tearing down (3), older releases did not handle errors at all.",
			vars:     [][2]string{show(envAsyncNew), show(envAsyncOld)}})
	}
	dump, dumpSet := get(envDump)
	trace, traceSet := get(envTrace)
	if !dumpSet || !truthy(dump) {
		out = append(out, ncclCheck{id: "nccl-no-dump-on-timeout", severity: finding.Info,
			claim:    "No debug dump on NCCL timeout (TORCH_NCCL_DUMP_ON_TIMEOUT is " + orUnset(dump, dumpSet) + "): a hang leaves no record of which collective each rank was in",
			decision: "Set TORCH_NCCL_DUMP_ON_TIMEOUT=1 with TORCH_NCCL_TRACE_BUFFER_SIZE=2000: on a timeout every rank dumps its flight recorder, naming the rank that never joined.",
			vars:     [][2]string{show(envDump), show(envTrace)}})
	}
	if !traceSet || strings.TrimSpace(trace) == "0" {
		c := ncclCheck{id: "nccl-no-flight-recorder", severity: finding.Info,
			claim:    "The NCCL flight recorder is not sized (TORCH_NCCL_TRACE_BUFFER_SIZE is " + orUnset(trace, traceSet) + "): it is off by default in older PyTorch releases",
			decision: "Set TORCH_NCCL_TRACE_BUFFER_SIZE=2000 (the current default) so the last collectives of every rank are kept for the dump.",
			vars:     [][2]string{show(envTrace)}}
		if dumpSet && truthy(dump) && traceSet {
			c.id, c.severity = "nccl-dump-without-buffer", finding.Warning
			c.claim = "TORCH_NCCL_DUMP_ON_TIMEOUT is on but TORCH_NCCL_TRACE_BUFFER_SIZE is 0: the dump on timeout will be empty"
		}
		out = append(out, c)
	}
	if v, ok := get(envNCCLTimout); ok {
		out = append(out, ncclCheck{id: "nccl-timeout-not-read", severity: finding.Info,
			claim:    "NCCL_TIMEOUT=" + safe(v) + " is set, but it is not among the variables PyTorch's ProcessGroupNCCL reads: the collective timeout is init_process_group(timeout=...), 10 minutes by default for NCCL",
			decision: "Pass the timeout in code: torch.distributed.init_process_group(\"nccl\", timeout=datetime.timedelta(minutes=...)).",
			vars:     [][2]string{show(envNCCLTimout)}})
	}
	if v, ok := get(envMonitoring); ok && !truthy(v) {
		out = append(out, ncclCheck{id: "nccl-monitoring-off", severity: finding.Warning,
			claim:    "The NCCL watchdog monitor is disabled (TORCH_NCCL_ENABLE_MONITORING=" + safe(v) + "): a watchdog stuck in a CUDA or NCCL call is never aborted",
			decision: "Leave TORCH_NCCL_ENABLE_MONITORING at 1 so a process whose watchdog stops beating is torn down after TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC.",
			vars:     [][2]string{show(envMonitoring), show(envHeartbeat)}})
	}
	if v, ok := get(envHeartbeat); ok {
		if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n > 3600 {
			out = append(out, ncclCheck{id: "nccl-heartbeat-timeout-long", severity: finding.Info,
				claim:    "The NCCL watchdog heartbeat timeout is " + strconv.Itoa(n) + " s: a stuck watchdog is aborted only after that long",
				decision: "Keep TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC near its default (a few minutes) unless collectives legitimately block longer.",
				vars:     [][2]string{show(envHeartbeat)}})
		}
	}
	return out
}

func orUnset(v string, set bool) string {
	if !set {
		return "unset"
	}
	return safe(v)
}

// ncclFindings checks every rank's environment and groups ranks that share
// a problem.
func ncclFindings(v *view, stalled bool) []finding.Finding {
	type group struct {
		c     ncclCheck
		ranks []int
		pids  []int
		label string
	}
	groups := map[string]*group{}
	var order []string
	for _, pid := range v.sortedPIDs() {
		p := v.procs[pid]
		if !isRankProcess(p) {
			continue
		}
		label, n, _ := rank(p)
		for _, c := range checkNCCLEnv(p.Env, stalled) {
			key := c.id
			for _, kv := range c.vars {
				key += "|" + kv[0] + "=" + kv[1]
			}
			g := groups[key]
			if g == nil {
				g = &group{c: c, label: strings.Fields(label)[0]}
				groups[key] = g
				order = append(order, key)
			}
			g.ranks = append(g.ranks, n)
			g.pids = append(g.pids, pid)
		}
	}
	var out []finding.Finding
	for _, key := range order {
		g := groups[key]
		who := "rank " + rankRanges(append([]int(nil), g.ranks...))
		if len(g.ranks) > 1 {
			who = "ranks " + rankRanges(append([]int(nil), g.ranks...))
		}
		if g.label == "local" {
			who = "local " + who
		}
		sort.Ints(g.pids)
		f := finding.Finding{ID: g.c.id, Severity: g.c.severity, Claim: g.c.claim + " (" + who + ")", Decision: g.c.decision,
			Seed: "004 (The NCCL hang)", Subject: who + " (pid " + ints(g.pids) + ")"}
		for _, kv := range g.c.vars {
			f.Evidence = append(f.Evidence, finding.Evidence{What: kv[0], Text: safe(kv[1]), Source: "/proc/PID/environ (allowlisted)"})
		}
		out = append(out, f)
	}
	return out
}
