package frozen

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Start methods of Python worker processes (seed 000 §5).
const (
	Fork       = "fork"
	Spawn      = "spawn"
	Forkserver = "forkserver"
)

// WorkerGroup is a Python process and the worker processes it started.
type WorkerGroup struct {
	Parent  int
	Method  string
	Workers []int
	// Evidence is how the method was recognised, Source where it was read.
	Evidence, Source string
}

func cmd(p *timeline.ProcInfo) string { return strings.Join(p.Cmdline, " ") }

// isSpawnChild: multiprocessing's spawn runs `python -c 'from
// multiprocessing.spawn import spawn_main; spawn_main(...)' --multiprocessing-fork`.
func isSpawnChild(p *timeline.ProcInfo) bool {
	return strings.Contains(cmd(p), "from multiprocessing.spawn import spawn_main")
}

// isForkserver: the server itself runs `-c 'from multiprocessing.forkserver
// import main; main(...)'`; its children are forked from it.
func isForkserver(p *timeline.ProcInfo) bool {
	return strings.Contains(cmd(p), "from multiprocessing.forkserver import main")
}

// isHelper: the resource tracker is not a worker.
func isHelper(p *timeline.ProcInfo) bool {
	return strings.Contains(cmd(p), "multiprocessing.resource_tracker")
}

const forkByLayout = "its memory layout (start_code, start_data, start_brk, start_stack, arg_start, env_start) is its parent's: forked, no exec since"

// forkEvidence says how p is known to be a fork of parent that did not
// exec, or "" when it is not one. The memory layouts decide (a child that
// exec'd, even the same program with the same command line as a launcher
// starting its ranks, has a layout of its own); where they were not seen,
// a command line equal to the parent's is taken as a fork, and said so.
func forkEvidence(p, parent *timeline.ProcInfo) string {
	switch p.Start {
	case "fork":
		return forkByLayout
	case "exec":
		return ""
	}
	if len(p.Cmdline) > 0 && cmd(p) == cmd(parent) {
		return "it runs its parent's command line unchanged (fork without exec)"
	}
	return ""
}

// WorkerGroups finds the job's Python worker processes and how each was
// started, from the process tree, the memory layouts and the command lines:
// a spawned child runs spawn_main, a forkserver child is forked from the
// forkserver process, a forked child keeps its parent's memory layout (fork
// without exec). Ranks are never workers, even when their command line is
// the launcher's.
func WorkerGroups(v *view) []WorkerGroup {
	groups := map[string]*WorkerGroup{}
	var keys []string
	add := func(parent int, method, evidence string, child int) {
		key := strconv.Itoa(parent) + "/" + method
		g := groups[key]
		if g == nil {
			src := "/proc/PID/cmdline"
			if evidence == forkByLayout {
				src = "/proc/PID/stat (memory layout)"
			}
			g = &WorkerGroup{Parent: parent, Method: method, Evidence: evidence, Source: src}
			groups[key] = g
			keys = append(keys, key)
		}
		g.Workers = append(g.Workers, child)
	}
	for _, pid := range v.sortedPIDs() {
		p := v.procs[pid]
		parent := v.procs[p.PPID]
		if parent == nil || isHelper(p) || len(p.Cmdline) == 0 || (isForkserver(p) && !isForkserver(parent)) {
			continue // the forkserver itself is a helper, its children are workers
		}
		switch {
		case isSpawnChild(p):
			add(p.PPID, Spawn, "its command line runs multiprocessing.spawn.spawn_main", pid)
		case isForkserver(parent):
			owner := parent.PPID
			if _, ok := v.procs[owner]; !ok {
				owner = p.PPID
			}
			add(owner, Forkserver, "forked from the forkserver process (pid "+strconv.Itoa(p.PPID)+")", pid)
		case IsPython(parent) && !isRankProcess(p):
			if ev := forkEvidence(p, parent); ev != "" {
				add(p.PPID, Fork, ev, pid)
			}
		}
	}
	sort.Strings(keys)
	out := make([]WorkerGroup, 0, len(keys))
	for _, k := range keys {
		out = append(out, *groups[k])
	}
	return out
}

// cpusAllowed counts the CPUs in a list such as "0-3,8-11"; 0 when unknown.
func cpusAllowed(list string) int {
	set, err := cpuset.Parse(list)
	if err != nil {
		return 0
	}
	return len(set)
}

// workerFindings reports how workers were started, fork after CUDA
// initialisation and more workers than cores.
func workerFindings(v *view, groups []WorkerGroup) []finding.Finding {
	var out []finding.Finding
	for _, g := range groups {
		parent := v.procs[g.Parent]
		name := v.procName(g.Parent)
		cores := cpusAllowed(parent.CPUsAllowed)
		coresSrc := "/proc/" + strconv.Itoa(g.Parent) + "/status (Cpus_allowed_list)"
		if cores == 0 {
			cores, coresSrc = v.tl.Meta.NumCPU, "online CPUs"
		}
		// fork after CUDA init
		if g.Method == Fork && (parent.CUDA.Initialised() || parent.CUDA.DriverLoaded()) {
			what := "after initialising CUDA: they inherited its driver handles"
			if !parent.CUDA.Initialised() {
				what = "after loading the CUDA driver (" + strings.Join(baseNames(parent.CUDA.DriverAPI), ", ") + "): they inherited its state"
				if len(parent.CUDA.DriverAPI) == 0 {
					what = "after loading the CUDA driver: they inherited its state"
				}
			}
			f := finding.Finding{ID: "fork-after-cuda-init", Severity: finding.Warning, Subject: name,
				Claim:    fmt.Sprintf("%s forked %s (pids %s) %s", name, plural(len(g.Workers), "worker", "workers"), ints(g.Workers), what),
				Decision: "Forked workers are safe only while they never touch CUDA: a CUDA call in one fails (\"Cannot re-initialize CUDA in forked subprocess\") or hangs on a lock held by a driver thread that did not survive the fork. Use DataLoader(multiprocessing_context=\"spawn\") or \"forkserver\" (started before any CUDA call), or keep the workers strictly CPU-only.",
				// Sources: 000 §5; 004 (Why fork() corrupts CUDA); CUDA
				// Driver API reference (cuInit).
			}
			if handles := append(append([]string{}, parent.CUDA.DeviceFDs...), parent.CUDA.Mapped...); len(handles) > 0 {
				f.Evidence = append(f.Evidence, finding.Evidence{What: "parent's CUDA driver handles", Text: strings.Join(handles, ", "), Source: "/proc/" + strconv.Itoa(g.Parent) + "/{fd,maps}"})
			}
			if len(parent.CUDA.DriverAPI) > 0 {
				f.Evidence = append(f.Evidence, finding.Evidence{What: "parent maps the CUDA driver API (a library exporting cuInit)", Text: strings.Join(parent.CUDA.DriverAPI, ", "), Source: "/proc/" + strconv.Itoa(g.Parent) + "/maps, the library's dynamic symbol table"})
			}
			for _, w := range g.Workers {
				wp := v.procs[w]
				if wp.CUDA != nil && (len(wp.CUDA.DeviceFDs) > 0 || len(wp.CUDA.Mapped) > 0 || len(wp.CUDA.DriverAPI) > 0) {
					f.Evidence = append(f.Evidence, finding.Evidence{What: "inherited by worker pid " + strconv.Itoa(w), Text: strings.Join(append(append(append([]string{}, wp.CUDA.DeviceFDs...), wp.CUDA.Mapped...), wp.CUDA.DriverAPI...), ", "), Source: "/proc/" + strconv.Itoa(w) + "/{fd,maps}"})
				}
				if v.onGPU(w) {
					f.Severity = finding.Critical
					f.Claim = fmt.Sprintf("%s forked workers after initialising CUDA, and worker pid %d uses the GPU", name, w)
					f.Evidence = append(f.Evidence, finding.Evidence{What: "worker pid " + strconv.Itoa(w) + " is a compute process on a GPU", Text: "listed by the device", Source: v.tl.Meta.GPUSource})
				}
			}
			out = append(out, f)
		}
		// Workers alive at once: a fork storm's children, each gone
		// before the next starts, never take turns on the CPUs.
		if n := v.concurrentWorkers(g.Workers); cores > 0 && n > cores {
			out = append(out, finding.Finding{ID: "workers-exceed-cores", Severity: finding.Warning, Subject: name,
				Claim: fmt.Sprintf("%s runs %d worker processes on %d CPUs: they take turns, and the trainer's own threads wait behind them", name, n, cores),
				Evidence: []finding.Evidence{
					{What: "worker processes (" + g.Method + ") alive at once, most", Value: float64(n), Source: "/proc/PID/stat (ppid), /proc/PID/cmdline"},
					{What: "CPUs the parent may run on", Value: float64(cores), Source: coresSrc},
				},
				Decision: "Use at most as many DataLoader workers as cores left after the trainer's own threads (num_workers <= cores - 2 is a common start); more workers add memory, not throughput.",
				// Sources: 000 §6 (oversubscription); 002 (num_workers)
			})
		}
		var wps []*timeline.ProcInfo
		for _, w := range g.Workers {
			wps = append(wps, v.procs[w])
		}
		untold, why := RanksUntold(wps)
		info := finding.Finding{ID: "worker-start-method", Severity: finding.Info, Subject: name,
			Claim: fmt.Sprintf("%s started %s by %s%s", name, plural(len(g.Workers), "worker process", "worker processes"), g.Method, RanksUntoldClause(untold, len(g.Workers))),
			Evidence: []finding.Evidence{
				{What: "workers", Value: float64(len(g.Workers)), Text: "pids " + ints(g.Workers), Source: "/proc/PID/stat (ppid)"},
				{What: "how the start method was recognised", Text: g.Evidence, Source: g.Source},
			},
			// Sources: 000 §5
		}
		if untold > 0 {
			info.Evidence = append(info.Evidence, RanksUntoldEvidence(untold, why))
		}
		switch g.Method {
		case Fork:
			info.Decision = "fork shares the parent's memory copy-on-write (cheap to start, but Python objects get copied as workers touch them) and is unsafe once the parent initialised CUDA; Python 3.14 changed Linux's default to forkserver. Pin the choice with DataLoader(multiprocessing_context=...)."
		default:
			info.Decision = g.Method + " workers start from a fresh interpreter: safe with CUDA, but the dataset is pickled into each worker, so per-worker memory and start-up time grow; keep the dataset cheap to pickle (paths and mmap'd files)."
		}
		if cores > 0 {
			info.Evidence = append(info.Evidence, finding.Evidence{What: "CPUs the parent may run on", Value: float64(cores), Source: coresSrc})
		}
		out = append(out, info)
	}
	return out
}

// baseNames are the file names of paths.
func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = p[strings.LastIndexByte(p, '/')+1:]
	}
	return out
}

// onGPU says whether a pid is listed as a compute process on a device.
func (v *view) onGPU(pid int) bool {
	for _, tk := range v.tl.Ticks {
		for _, g := range tk.GPUs {
			for _, p := range g.Processes {
				if p.PID == pid {
					return true
				}
			}
		}
	}
	return false
}

// RanksUntold says of worker processes (multiprocessing children: a fork
// without exec, spawn, forkserver) how many had an environment gpufeed could
// not read, and why. A launcher names each rank in its environment (RANK,
// LOCAL_RANK); where that is not visible (another user's processes, without
// CAP_SYS_PTRACE) a rank started by a fork of its launcher, or by
// torch.multiprocessing.spawn, looks like any worker process. Findings about
// workers then say that what they call workers may be ranks.
func RanksUntold(procs []*timeline.ProcInfo) (n int, why string) {
	for _, p := range procs {
		if p == nil || p.Role == "dataloader-worker" { // known by its threads' name
			continue
		}
		if w := p.NotVisible["env"]; w != "" {
			n++
			if why == "" {
				why = w
			}
		}
	}
	return n, why
}

// RanksUntoldClause is the words a worker finding's claim adds when n of
// its workers' environment was not visible.
func RanksUntoldClause(n, of int) string {
	if n == 0 {
		return ""
	}
	if of == 1 {
		return "; it may be a rank rather than a worker: its environment, where a launcher names each rank (RANK), is not visible"
	}
	them := "their environment, where a launcher names each rank (RANK), is"
	if n < of {
		them = fmt.Sprintf("the environment of %d of them, where a launcher names each rank (RANK), is", n)
	}
	return "; they may be ranks rather than workers: " + them + " not visible"
}

// RanksUntoldEvidence is the evidence line that goes with the clause.
func RanksUntoldEvidence(n int, why string) finding.Evidence {
	return finding.Evidence{What: "whether they are ranks (RANK in their environment)",
		Text: fmt.Sprintf("%d of them: %s", n, why), Source: "/proc/PID/environ"}
}
