package bpfcap

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"
)

// objects is a bpf2go objects struct of two programs: one that loads
// anywhere and the fork-following one.
type objects struct {
	Ok   *ebpf.Program `ebpf:"ok"`
	Fork *ebpf.Program `ebpf:"fork"`
}

func (o *objects) close() {
	for _, p := range []*ebpf.Program{o.Ok, o.Fork} {
		if p != nil {
			p.Close()
		}
	}
}

func spec(okBody asm.Instructions) *ebpf.CollectionSpec {
	ret0 := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	return &ebpf.CollectionSpec{Programs: map[string]*ebpf.ProgramSpec{
		"ok":        {Name: "ok", Type: ebpf.SocketFilter, License: "GPL", Instructions: okBody},
		ForkProgram: {Name: "fork", Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp, AttachTo: "sched_process_fork", License: "GPL", Instructions: ret0},
	}}
}

// skipDenied skips where this process may not load BPF programs at all
// (an unprivileged run of the tests): what Load then says is checked by
// TestLoadAndForkErrors.
func skipDenied(t *testing.T, err error) {
	var u *Unavailable
	if errors.As(err, &u) && strings.Contains(u.Missing, "needs CAP_BPF") {
		t.Skip("this process may not load BPF programs:", err)
	}
}

// TestLoadFollowsOnlyWhenAsked: the load path of the syscall summary and
// the driver probes loads the fork program only when following is asked
// (and the kernel has BTF), loads the rest all the same (the old copies
// deleted the fork program from the spec, and the objects struct naming
// it then failed to load: "unknown program fork"), and attaches it.
func TestLoadFollowsOnlyWhenAsked(t *testing.T) {
	ok := asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}
	var o objects
	s := spec(ok)
	followed, err := Load("test", s, &o, false, "5.12 or later")
	skipDenied(t, err)
	if err != nil {
		t.Fatal(err)
	}
	defer o.close()
	if followed || o.Ok == nil || o.Fork == nil || s.Programs[ForkProgram].Type == ebpf.Tracing {
		t.Fatalf("follow not asked: followed %v, ok %v, fork %v (the spec's is %v: want a stand-in)", followed, o.Ok, o.Fork, s.Programs[ForkProgram].Type)
	}
	if !BTF("") {
		t.Skip("no kernel BTF: the fork program cannot load here")
	}
	var f objects
	followed, err = Load("test", spec(ok), &f, true, "5.12 or later")
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	if !followed || f.Fork == nil {
		t.Fatalf("follow asked with BTF: followed %v, fork %v", followed, f.Fork)
	}
	l, err := AttachFork("test", f.Fork)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
}

// TestLoadAndForkErrors: a program the verifier refuses names the kernel
// the caller needs; a refusal for want of privilege names the
// capabilities, for the load and the fork attach alike.
func TestLoadAndForkErrors(t *testing.T) {
	var o objects
	_, err := Load("syscall summary", spec(asm.Instructions{asm.Return()}), &o, false, "5.12 or later") // R0 never set
	skipDenied(t, err)
	var u *Unavailable
	if !errors.As(err, &u) || u.What != "syscall summary" || u.Missing != "a kernel that accepts this BPF program (5.12 or later)" {
		t.Errorf("refused program: %v, want a kernel named", err)
	}
	for _, c := range []struct {
		err  error
		want string
	}{
		{loadError("CUDA driver probes", "5.15 or later: attach cookies", fmt.Errorf("load: %w", unix.EPERM)),
			"loading eBPF programs needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, or root); in a container, a seccomp profile that allows bpf()"},
		{loadError("CUDA driver probes", "5.15 or later: attach cookies", errors.New("invalid argument")),
			"a kernel that accepts this BPF program (5.15 or later: attach cookies)"},
		{forkError("syscall summary", fmt.Errorf("attach: %w", unix.EACCES)),
			"attaching to the sched_process_fork tracepoint needs CAP_PERFMON (or CAP_SYS_ADMIN)"},
		// The syscall summary said "a kernel with raw tracepoints (4.17 or
		// later)" here: the fork program is BTF-typed, not a raw tracepoint.
		{forkError("syscall summary", errors.New("no such program")),
			"attaching to sched_process_fork (BTF-typed tracepoints)"},
	} {
		if !errors.As(c.err, &u) || u.Missing != c.want || u.Err == nil {
			t.Errorf("got %v, want what is missing to be %q", c.err, c.want)
		}
	}
}
