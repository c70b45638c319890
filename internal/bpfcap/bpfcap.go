// Package bpfcap says whether this process may load the eBPF programs of
// the syscall summary and the CUDA driver probes, and, when not, which
// capability or kernel setting is missing, without loading anything; and
// it holds the one path both load their objects and attach their
// fork-following program by (Load, AttachFork).
package bpfcap

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

// Unavailable says why a BPF measurement cannot be taken and what would
// allow it.
type Unavailable struct {
	// What is the measurement ("syscall summary", "CUDA driver probes").
	What string
	// Missing is the capability or setting that would show it.
	Missing string
	Err     error
}

func (u *Unavailable) Error() string {
	if u.Err != nil {
		return fmt.Sprintf("%s not available: %v: %s", u.What, u.Err, u.Missing)
	}
	return u.What + " not available: " + u.Missing
}

func (u *Unavailable) Unwrap() error { return u.Err }

// Capability bits (linux/capability.h).
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// Check says whether this process's effective capabilities allow loading
// tracing BPF programs: CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN (kernels
// before 5.8 know only the latter). proc is where /proc is ("" is /proc).
func Check(proc, what string) error {
	if proc == "" {
		proc = "/proc"
	}
	caps, err := EffectiveCaps(filepath.Join(proc, "self/status"))
	if err != nil {
		return &Unavailable{What: what, Missing: "reading this process's capabilities", Err: err}
	}
	if caps&(1<<capSysAdmin) != 0 {
		return nil
	}
	var missing []string
	if caps&(1<<capBPF) == 0 {
		missing = append(missing, "CAP_BPF")
	}
	if caps&(1<<capPerfmon) == 0 {
		missing = append(missing, "CAP_PERFMON")
	}
	if len(missing) == 0 {
		return nil
	}
	return &Unavailable{What: what, Missing: "loading eBPF programs needs " + strings.Join(missing, " and ") +
		" (or CAP_SYS_ADMIN, or root)"}
}

// Uprobes says whether the kernel can place uprobes: the perf-event PMU
// (sys/bus/event_source/devices/uprobe) or tracefs's uprobe_events.
// sys is where /sys is ("" is /sys).
func Uprobes(sys, what string) error {
	if sys == "" {
		sys = "/sys"
	}
	if _, err := os.Stat(filepath.Join(sys, "bus/event_source/devices/uprobe/type")); err == nil {
		return nil
	}
	for _, t := range []string{"kernel/tracing/uprobe_events", "kernel/debug/tracing/uprobe_events"} {
		if _, err := os.Stat(filepath.Join(sys, t)); err == nil {
			return nil
		}
	}
	return &Unavailable{What: what, Missing: "a kernel with uprobes (CONFIG_UPROBE_EVENTS: no uprobe PMU under " +
		filepath.Join(sys, "bus/event_source/devices") + " and no tracefs uprobe_events)"}
}

// BTF says whether the running kernel describes its types (BTF, at
// sys/kernel/btf/vmlinux), which BTF-typed programs need.
func BTF(sys string) bool {
	if sys == "" {
		sys = "/sys"
	}
	_, err := os.Stat(filepath.Join(sys, "kernel/btf/vmlinux"))
	return err == nil
}

// EffectiveCaps reads the CapEff mask of a /proc/PID/status file.
func EffectiveCaps(status string) (uint64, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0, err
	}
	v, ok := procfs.Field(b, "CapEff")
	if !ok {
		return 0, errors.New(status + ": no CapEff line")
	}
	c, err := strconv.ParseUint(v, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: CapEff: want hexadecimal, got %q", status, v)
	}
	return c, nil
}

// Comm is a task's name as the kernel's bpf_get_current_comm writes it: a
// 16-byte field, NUL-terminated when shorter.
func Comm(c [16]int8) string {
	var b []byte
	for _, x := range c {
		if x == 0 {
			break
		}
		b = append(b, byte(x))
	}
	return string(b)
}
