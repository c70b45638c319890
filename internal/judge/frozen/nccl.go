package frozen

import (
	"path"
	"slices"
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

// backend is what a rank process shows of torch.distributed's backends.
type backend struct {
	// known: its memory maps were read (at the end of the window).
	known bool
	// nccl: it maps NCCL (libnccl, ROCm's librccl, NCCL's shared-memory
	// segments) or runs threads NCCL or ProcessGroupNCCL named.
	nccl bool
	// libs are the collective libraries mapped, by file name; threads the
	// NCCL-named threads.
	libs    []string
	threads []string
}

// backendOf reads a process's collective libraries (ProcInfo.Collectives)
// and NCCL threads (pt_nccl_* from PyTorch's ProcessGroupNCCL, NCCL's own).
func (v *view) backendOf(pid int) backend {
	var b backend
	p := v.procs[pid]
	if p == nil {
		return b
	}
	if p.Collectives != nil {
		b.known = true
		for _, m := range p.Collectives.Mapped {
			b.libs = append(b.libs, path.Base(m))
			if timeline.IsNCCL(m) {
				b.nccl = true
			}
		}
	}
	for _, th := range v.threads {
		if th.PID != pid || th.Exited {
			continue
		}
		if th.Role == "nccl" || strings.HasPrefix(th.Comm, "pt_nccl") || strings.HasPrefix(th.Comm, "NCCL") {
			b.nccl, b.known = true, true
			b.threads = append(b.threads, th.Comm)
		}
	}
	sort.Strings(b.threads)
	b.threads = slices.Compact(b.threads)
	return b
}

// name says which backend the libraries show.
func (b backend) name() string {
	if b.nccl {
		for _, l := range b.libs {
			if strings.HasPrefix(l, "librccl") {
				return "RCCL (ROCm's NCCL)"
			}
		}
		return "NCCL"
	}
	var names []string
	for _, l := range b.libs {
		for _, n := range [][2]string{{"libmpi", "MPI"}, {"libucc", "UCC"}, {"libgloo", "gloo"}} {
			if strings.HasPrefix(l, n[0]) && !slices.Contains(names, n[1]) {
				names = append(names, n[1])
			}
		}
	}
	return strings.Join(names, ", ")
}

// evidence describes what was seen, for n processes ("they map ...").
func (b backend) evidence(n int) string {
	subj, mapv, runv := "it", "maps", "runs"
	if n > 1 {
		subj, mapv, runv = "they", "map", "run"
	}
	libs := "no collective library (libnccl, librccl, libmpi, libucc, libgloo)"
	if len(b.libs) > 0 {
		libs = strings.Join(b.libs, ", ")
		if !b.nccl {
			libs += " but no NCCL library,"
		}
	}
	thr := "no NCCL thread"
	if len(b.threads) > 0 {
		thr = "NCCL threads (" + strings.Join(b.threads, ", ") + ")"
	}
	return subj + " " + mapv + " " + libs + " and " + runv + " " + thr
}

// ncclFindings checks the environment of every rank that uses NCCL, groups
// ranks that share a problem, and says which backend the ranks were seen
// to use: NCCL's settings are advice only where NCCL is in use.
func ncclFindings(v *view, stalled bool) []finding.Finding {
	type group struct {
		c     ncclCheck
		ranks []int
		pids  []int
		label string
		used  string
	}
	groups := map[string]*group{}
	var order []string
	type seen struct {
		ranks, pids []int
		label       string
		nccl, known bool
		name        string
		b           backend
	}
	backends := map[string]*seen{}
	var border []string
	for _, pid := range v.sortedPIDs() {
		p := v.procs[pid]
		if !isRankProcess(p) || p.Exited {
			continue
		}
		label, n, _ := rank(p)
		b := v.backendOf(pid)
		key := strconv.FormatBool(b.known) + "|" + b.evidence(1)
		if backends[key] == nil {
			backends[key] = &seen{label: strings.Fields(label)[0], nccl: b.nccl, known: b.known, name: b.name(), b: b}
			border = append(border, key)
		}
		backends[key].ranks = append(backends[key].ranks, n)
		backends[key].pids = append(backends[key].pids, pid)
		if !b.nccl {
			continue
		}
		for _, c := range checkNCCLEnv(p.Env, stalled) {
			key := c.id
			for _, kv := range c.vars {
				key += "|" + kv[0] + "=" + kv[1]
			}
			g := groups[key]
			if g == nil {
				g = &group{c: c, label: strings.Fields(label)[0], used: b.evidence(1)}
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
		who := rankWho(g.label, g.ranks)
		sort.Ints(g.pids)
		f := finding.Finding{ID: g.c.id, Severity: g.c.severity, Claim: g.c.claim + " (" + who + ")", Decision: g.c.decision,
			// Sources: 004 (The NCCL hang)
			Subject: who + " (pid " + ints(g.pids) + ")"}
		for _, kv := range g.c.vars {
			f.Evidence = append(f.Evidence, finding.Evidence{What: kv[0], Text: safe(kv[1]), Source: "/proc/PID/environ (allowlisted)"})
		}
		f.Evidence = append(f.Evidence, finding.Evidence{What: "NCCL in use", Text: safe(g.used), Source: "/proc/PID/maps, thread names"})
		out = append(out, f)
	}
	for _, key := range border {
		bk := backends[key]
		who := rankWho(bk.label, bk.ranks)
		sort.Ints(bk.pids)
		text := bk.b.evidence(len(bk.ranks))
		verb := " uses "
		if len(bk.ranks) > 1 {
			verb = " use "
		}
		f := finding.Finding{ID: "distributed-backend", Severity: finding.Info, Subject: who + " (pid " + ints(bk.pids) + ")",
			Evidence: []finding.Evidence{{What: "collective libraries mapped and NCCL threads", Text: safe(text), Window: "at the end of the window", Source: "/proc/PID/maps, /proc/PID/task/TID/comm"}}}
		switch {
		case bk.nccl:
			f.Claim = who + verb + bk.name + ": " + safe(text)
			f.Decision = "The NCCL settings checked here apply to these ranks."
		case !bk.known:
			f.Claim = "Whether " + who + verb[:len(verb)-1] + " NCCL was not seen (their memory maps were not read): NCCL settings not checked"
			f.Decision = "Run gpufeed as the job's user or with CAP_SYS_PTRACE, so that /proc/PID/maps is readable."
			f.Evidence[0].Text = "not read"
		default:
			used := "no torch.distributed backend library"
			if bk.name != "" {
				used = bk.name
			}
			f.Claim = who + verb + used + ", not NCCL (" + safe(text) + "): the NCCL settings do not apply and were not checked"
			f.Decision = "A collective waiting for a dead or stuck peer fails only after its process group's timeout, init_process_group(timeout=...)."
			if bk.name == "gloo" {
				f.Decision += " For gloo it is 30 minutes by default: pass a shorter one so that a lost rank becomes an error, not a long wait."
			}
		}
		out = append(out, f)
	}
	return out
}

// rankWho names ranks for a claim: "rank 2", "ranks 0-2", "local ranks 0-1".
func rankWho(label string, ranks []int) string {
	who := "rank " + rankRanges(append([]int(nil), ranks...))
	if len(ranks) > 1 {
		who = "ranks " + rankRanges(append([]int(nil), ranks...))
	}
	if label == "local" {
		who = "local " + who
	}
	return who
}

// failLoudly is how a hung job's surviving ranks are made to fail loudly
// next time instead of waiting in the collective, for the backend its live
// ranks were seen to use: set, the advice as an imperative ("set ..."),
// and with, as a condition ("with ... set"). NCCL's async error handling
// where a rank maps NCCL, and where no rank was seen or a rank's memory
// maps were not read (the common case on a GPU host); the process group's
// timeout where every live rank was read and none uses NCCL, since NCCL's
// settings do nothing there (gloo's default timeout is 30 minutes:
// torch.distributed's init_process_group documentation).
func (v *view) failLoudly() (set, with string) {
	ranks, known, nccl, gloo := 0, true, false, false
	for _, pid := range v.sortedPIDs() {
		p := v.procs[pid]
		if !isRankProcess(p) || p.Exited || !v.alive(pid) {
			continue
		}
		b := v.backendOf(pid)
		ranks++
		known = known && b.known
		nccl = nccl || b.nccl
		gloo = gloo || strings.Contains(b.name(), "gloo")
	}
	if ranks == 0 || !known || nccl {
		return "set TORCH_NCCL_ASYNC_ERROR_HANDLING", "with TORCH_NCCL_ASYNC_ERROR_HANDLING set"
	}
	timeout := "a shorter process-group timeout, init_process_group(timeout=...)"
	why := "the ranks use no NCCL, so its error handling does not apply"
	if gloo {
		why = "30 minutes by default for gloo; the ranks use gloo, not NCCL, so NCCL's error handling does not apply"
	}
	return "pass " + timeout + " (" + why + ")", "given " + timeout + " (" + why + ")"
}
