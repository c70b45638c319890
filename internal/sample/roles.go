package sample

import (
	"path/filepath"
	"slices"
	"strings"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Process roles.
const (
	RoleTrainer          = "trainer"           // the target, when it is not a launcher
	RoleLauncher         = "torchrun"          // torchrun / torch.distributed.run|launch
	RoleOtherLauncher    = "launcher"          // mpirun, srun, deepspeed, accelerate, or any process that started ranks
	RoleRank             = "rank"              // a process with RANK/LOCAL_RANK in its environment, not a fork of a rank
	RoleDataLoaderWorker = "dataloader-worker" // its main thread is named pt_data_worker by PyTorch
	RoleWorker           = "worker"            // a multiprocessing child (spawn, forkserver, or a fork that did not exec)
	RoleChild            = "child"             // anything else the tree started
)

// Thread roles. PyTorch names its threads (c10::setThreadName and
// torch.multiprocessing._set_thread_name); others inherit the process name.
const (
	ThreadMain     = "main"
	ThreadAutograd = "autograd"    // pt_autograd_N: one per device, runs backward
	ThreadPin      = "pin-memory"  // pt_data_pin: DataLoader's pin-memory thread
	ThreadNCCL     = "nccl"        // pt_nccl_* (watchdog, heartbeat) and NCCL's own threads
	ThreadC10d     = "c10d"        // pt_tcpstore*, pt_watchdog: rendezvous store and its watchdog
	ThreadTorch    = "torch-pool"  // pt_thread_pool: c10's intra-/inter-op pool
	ThreadIntraOp  = "intra-op"    // threads of a torch process that kept an inherited name: OpenMP/MKL pool threads
	ThreadCUDA     = "cuda-driver" // cuda-EvtHandlr and other threads libcuda starts
	ThreadWorker   = "dataloader-worker"
	ThreadUnnamed  = "unnamed" // inherits the process name; nothing more is known
)

// ThreadRole names a thread from its name and its place in the process.
// inherited lists the names a thread that never named itself carries (the
// executable's, and the main thread's: Linux threads inherit the creator's
// name, so after PyTorch renames the main thread pt_main_thread, the OpenMP
// threads it starts are called pt_main_thread too); torch says whether the
// process shows PyTorch-named threads.
func ThreadRole(comm string, isMain bool, inherited []string, torch bool) string {
	switch {
	case strings.HasPrefix(comm, "pt_autograd"):
		return ThreadAutograd
	case comm == "pt_data_pin" || strings.Contains(comm, "pin_memory") || strings.Contains(comm, "(_pin_"):
		return ThreadPin
	case strings.HasPrefix(comm, "pt_nccl") || strings.HasPrefix(comm, "NCCL") || strings.HasPrefix(comm, "nccl"):
		return ThreadNCCL
	case strings.HasPrefix(comm, "pt_tcpstore") || comm == "pt_watchdog":
		return ThreadC10d
	case comm == "pt_thread_pool":
		return ThreadTorch
	case strings.HasPrefix(comm, "cuda-") || (strings.HasPrefix(comm, "cuda") && len(comm) > 4 && isDigits(comm[4:])):
		return ThreadCUDA
	case isMain:
		return ThreadMain
	case comm == "pt_data_worker":
		return ThreadWorker
	case torch && slices.Contains(inherited, comm):
		return ThreadIntraOp
	}
	return ThreadUnnamed
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// launcherKind recognises launchers from the command line.
func launcherKind(comm string, cmdline []string) string {
	if comm == "torchrun" {
		return RoleLauncher
	}
	for i, a := range cmdline {
		if i > 3 {
			break
		}
		base := filepath.Base(a)
		switch {
		case base == "torchrun", a == "torch.distributed.run", a == "torch.distributed.launch":
			return RoleLauncher
		case base == "mpirun", base == "mpiexec", base == "srun", base == "deepspeed", base == "accelerate":
			return RoleOtherLauncher
		}
	}
	return ""
}

// Start methods judged from the memory layouts (timeline.ProcInfo.Start).
const (
	StartFork = "fork" // the child still runs its parent's image: fork without exec
	StartExec = "exec" // the child runs a program of its own
)

// startOf judges how p came from parent: a child that has not exec'd has
// its parent's layout to the byte (fork copies the address space), an
// exec'd one has its own (new random addresses under ASLR, and the new
// program's arguments and environment). "" when either layout is unknown.
func startOf(p, parent *timeline.ProcInfo) string {
	if parent == nil || p.Layout == nil || parent.Layout == nil {
		return ""
	}
	if *p.Layout == *parent.Layout {
		return StartFork
	}
	return StartExec
}

func sameCmdline(p, parent *timeline.ProcInfo) bool {
	return parent != nil && len(p.Cmdline) > 0 && slices.Equal(p.Cmdline, parent.Cmdline)
}

// forked says p is a fork of parent that did not exec: by the layouts, or,
// where they are not known (not visible, an older recording), by the
// command line it shares with its parent.
func forked(p, parent *timeline.ProcInfo) bool {
	switch p.Start {
	case StartFork:
		return true
	case StartExec:
		return false
	}
	return sameCmdline(p, parent)
}

func isPython(p *timeline.ProcInfo) bool {
	if p == nil {
		return false
	}
	if strings.HasPrefix(p.Comm, "python") || strings.HasPrefix(p.Comm, "pt_") {
		return true
	}
	return len(p.Cmdline) > 0 && strings.HasPrefix(filepath.Base(p.Cmdline[0]), "python")
}

// isMultiprocessingChild recognises a child started by Python's
// multiprocessing: spawn and forkserver exec a command line that names
// their module; fork leaves the child in its parent's image.
func isMultiprocessingChild(p, parent *timeline.ProcInfo) bool {
	line := strings.Join(p.Cmdline, " ")
	if strings.Contains(line, "multiprocessing.spawn") || strings.Contains(line, "multiprocessing.forkserver") ||
		strings.Contains(line, "multiprocessing.resource_tracker") {
		return true
	}
	if p.Start == "" {
		return sameCmdline(p, parent)
	}
	return p.Start == StartFork && isPython(parent)
}

// hasRank says the allowlisted environment gives p a rank.
func hasRank(p *timeline.ProcInfo) bool { return p.Env["RANK"] != "" || p.Env["LOCAL_RANK"] != "" }

// isRank says p is a rank: RANK or LOCAL_RANK in its environment, and not a
// fork of a process holding the same rank (a rank's DataLoader workers
// inherit its environment: they are its workers, not more ranks).
func isRank(p, parent *timeline.ProcInfo) bool {
	if !hasRank(p) {
		return false
	}
	if parent != nil && hasRank(parent) && parent.Env["RANK"] == p.Env["RANK"] &&
		parent.Env["LOCAL_RANK"] == p.Env["LOCAL_RANK"] && forked(p, parent) {
		return false
	}
	return true
}

// AssignRoles names every process's and thread's role in tl from names,
// command lines, environments and the tree. It runs at the end of a
// window, when the whole tree is known, and again on replay is not needed:
// roles are recorded.
func AssignRoles(tl *timeline.Timeline) {
	byPID := map[int]*timeline.ProcInfo{}
	for _, p := range tl.Procs {
		if old, ok := byPID[p.Key.PID]; !ok || p.FirstSeen > old.FirstSeen {
			byPID[p.Key.PID] = p
		}
	}
	threadsOf := map[int][]*timeline.ThreadInfo{}
	for _, t := range tl.Threads {
		threadsOf[t.PID] = append(threadsOf[t.PID], t)
	}
	mainComm := func(p *timeline.ProcInfo) string {
		for _, t := range threadsOf[p.Key.PID] {
			if t.Key.TID == p.Key.PID {
				return t.Comm
			}
		}
		return p.Comm
	}
	for _, p := range tl.Procs {
		parent := byPID[p.PPID]
		if p.Key.PID == tl.Meta.Target.PID {
			parent = nil
		}
		p.Start = startOf(p, parent)
		switch {
		case launcherKind(p.Comm, p.Cmdline) != "":
			p.Role = launcherKind(p.Comm, p.Cmdline)
		case mainComm(p) == "pt_data_worker":
			p.Role = RoleDataLoaderWorker
		case isRank(p, parent):
			p.Role = RoleRank
		case p.Key.PID == tl.Meta.Target.PID:
			p.Role = RoleTrainer
		case isMultiprocessingChild(p, parent):
			p.Role = RoleWorker
		default:
			p.Role = RoleChild
		}
	}
	// A process that is no rank but started ranks is their launcher,
	// whatever its name (a plain script running its ranks as srun does).
	for _, p := range tl.Procs {
		if p.Role != RoleRank || p.Exited {
			continue
		}
		if parent := byPID[p.PPID]; parent != nil && (parent.Role == RoleTrainer || parent.Role == RoleChild) {
			parent.Role = RoleOtherLauncher
		}
	}
	for pid, ts := range threadsOf {
		p := byPID[pid]
		var inherited []string
		if p != nil {
			inherited = append(inherited, exeComm(p))
		}
		for _, t := range ts {
			if t.Key.TID == pid {
				inherited = append(inherited, t.Comm)
			}
		}
		torch := false
		for _, t := range ts {
			if strings.HasPrefix(t.Comm, "pt_") {
				torch = true
				break
			}
		}
		for _, t := range ts {
			t.Role = ThreadRole(t.Comm, t.Key.TID == pid, inherited, torch)
		}
	}
}

// exeComm is the name unnamed threads inherit: the executable's base name
// cut to 15 bytes (TASK_COMM_LEN), or the process's comm when no command
// line is known.
func exeComm(p *timeline.ProcInfo) string {
	if len(p.Cmdline) > 0 {
		c := filepath.Base(p.Cmdline[0])
		if len(c) > 15 {
			c = c[:15]
		}
		return c
	}
	return p.Comm
}
