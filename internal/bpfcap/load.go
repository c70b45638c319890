package bpfcap

import (
	"errors"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// ForkProgram is the name both BPF objects give the program that follows
// the watched processes' children (a BTF-typed sched_process_fork
// tracepoint, tp_btf): it loads only on a kernel with BTF.
const ForkProgram = "fork"

// Load loads spec's programs and maps into objs (a bpf2go objects struct),
// the one load path of the syscall summary and the CUDA driver probes: the
// locked-memory limit lifted first (kernels before 5.11 charge BPF maps to
// RLIMIT_MEMLOCK), the fork-following program loaded only when follow is
// asked and the kernel has BTF. It returns whether children are followed.
//
// Without following, the fork program is replaced by one that returns 0,
// loads on any kernel and is never attached: objs names every program of
// the object, and LoadAndAssign refuses a struct naming one the spec lacks
// (both copies of this path deleted it, so that without BTF, or with
// NoFollow, neither measurement loaded at all).
// An error is an *Unavailable saying what would allow it: the capabilities
// where the kernel refused them, else a kernel that accepts the programs
// (kernel says which: "5.12 or later").
func Load(what string, spec *ebpf.CollectionSpec, objs any, follow bool, kernel string) (followed bool, err error) {
	if err := rlimit.RemoveMemlock(); err != nil {
		return false, &Unavailable{What: what, Missing: "a higher locked-memory limit (ulimit -l) for BPF maps", Err: err}
	}
	follow = follow && BTF("")
	if !follow {
		Stub(spec, ForkProgram)
	}
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		return false, loadError(what, kernel, err)
	}
	return follow, nil
}

// Stub replaces spec's programs named (those it has) with one that returns
// 0, loads on any kernel and is never attached: a program this kernel
// cannot load, or one not used, stays in the objects struct without
// costing its verification.
func Stub(spec *ebpf.CollectionSpec, names ...string) {
	for _, name := range names {
		if spec.Programs[name] != nil {
			spec.Programs[name] = &ebpf.ProgramSpec{Name: name, Type: ebpf.SocketFilter, License: "GPL",
				Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}}
		}
	}
}

func loadError(what, kernel string, err error) error {
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) && denied(err) {
		return &Unavailable{What: what, Missing: "loading eBPF programs needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, or root); " +
			"in a container, a seccomp profile that allows bpf()", Err: err}
	}
	return &Unavailable{What: what, Missing: "a kernel that accepts this BPF program (" + kernel + ")", Err: err}
}

// AttachFork attaches the fork-following program: from here on the
// children the watched processes fork are watched too.
func AttachFork(what string, prog *ebpf.Program) (link.Link, error) {
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		return nil, forkError(what, err)
	}
	return l, nil
}

func forkError(what string, err error) error {
	if denied(err) {
		return &Unavailable{What: what, Missing: "attaching to the sched_process_fork tracepoint needs CAP_PERFMON (or CAP_SYS_ADMIN)", Err: err}
	}
	return &Unavailable{What: what, Missing: "attaching to sched_process_fork (BTF-typed tracepoints)", Err: err}
}

func denied(err error) bool { return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) }
