package diagnose

import (
	"errors"
	"fmt"
	"os"

	"github.com/gpufeed/gpufeed/internal/cpusample"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/sample"
	"github.com/gpufeed/gpufeed/internal/schedbpf"
)

// The --profile modes: auto profiles where allowed and says what is
// missing where not; on fails early where not allowed; off never profiles.
const (
	ProfileAuto = "auto"
	ProfileOn   = "on"
	ProfileOff  = "off"
)

// CheckProfile fails when mode is on and this process may not sample
// every CPU, naming what would allow it; it is nil otherwise.
func CheckProfile(fsys procfs.FS, mode string) error {
	switch mode {
	case ProfileAuto, ProfileOff, "":
		return nil
	case ProfileOn:
		if err := cpusample.Check(fsys.Proc); err != nil {
			return err
		}
		return checkBPF(fsys)
	}
	return fmt.Errorf("--profile %s: want auto, on or off", mode)
}

// CheckSched checks --sched's value and, for bpf, that the scheduler's
// events may be loaded here (before a command is started or a window
// opened).
func CheckSched(fsys procfs.FS, mode string) error {
	switch mode {
	case sample.SchedAuto, sample.SchedProc, "":
		return nil
	case sample.SchedBPF:
		if fsys.Proc != "/proc" && fsys.Proc != "" {
			return fmt.Errorf("--sched bpf: the scheduler's events are this kernel's, read by pid in gpufeed's own pid namespace; with another /proc (%s) use --sched proc or auto", fsys.Proc)
		}
		if err := schedbpf.Check(fsys.Proc); err != nil {
			return fmt.Errorf("--sched bpf: %w", err)
		}
		return nil
	}
	return fmt.Errorf("--sched %s: want auto, bpf or proc", mode)
}

// profileStarter starts the CPU profile of the tree under root, or, when
// it is not allowed, a profile that says why (mode auto) or the error
// (mode on, reported before sampling starts).
func profileStarter(fsys procfs.FS, mode string, root int) (func() ProfileRun, error) {
	if mode == ProfileOff || mode == "" {
		return func() ProfileRun {
			return ProfileRun{Stop: func() *profile.CPUProfile { return &profile.CPUProfile{State: profile.StateOff} }}
		}, nil
	}
	self := os.Getpid()
	keep := func(pid int) bool { return pid != self && inTree(fsys, pid, root) }
	if err := cpusample.Check(fsys.Proc); err != nil {
		return unavailable(mode, err)
	}
	// Started here, before the window, so that a refusal by the kernel
	// (a seccomp filter) fails early too when mode is on.
	p, err := cpusample.Start(cpusample.Options{Proc: fsys.Proc, Keep: keep})
	if err != nil {
		return unavailable(mode, err)
	}
	return func() ProfileRun { return ProfileRun{Stop: p.Stop, Drain: p.Drain} }, nil
}

// ProfileRun is a started CPU profile: Stop ends it and returns it; Drain,
// where not nil, reads what it sampled so far (the sampler's tick calls
// it).
type ProfileRun struct {
	Stop  func() *profile.CPUProfile
	Drain func()
}

func unavailable(mode string, err error) (func() ProfileRun, error) {
	if mode == ProfileOn {
		return nil, err
	}
	missing := err.Error()
	var u *cpusample.Unavailable
	if errors.As(err, &u) {
		missing = u.Missing
	}
	return func() ProfileRun {
		return ProfileRun{Stop: func() *profile.CPUProfile {
			return &profile.CPUProfile{State: profile.StateUnavailable, Missing: missing, CannotTell: cpusample.CannotTell}
		}}
	}, nil
}

// inTree says whether pid is root or one of its descendants, by parent
// links (at most 64 levels: a cycle or a deep tree ends the walk).
func inTree(fsys procfs.FS, pid, root int) bool {
	for i := 0; i < 64 && pid > 1; i++ {
		if pid == root {
			return true
		}
		t, err := fsys.Describe(pid)
		if err != nil {
			return false
		}
		pid = t.PPID
	}
	return pid == root
}

// Probes returns what starts the CPU profile, the syscall summary and the
// CUDA driver probes of the tree under root for an Observation, under the
// --profile mode given, as Run starts them: auto takes what the host allows
// and says what is missing for the rest; on fails here, before the window,
// naming what is missing; off takes none. gpufeed demo observes its
// scenarios with them, as diagnose --pid does.
func Probes(fsys procfs.FS, mode string, root int) (func() ProfileRun, func() BPFStop, error) {
	startBPF, err := bpfStarter(fsys, mode, root)
	if err != nil {
		return nil, nil, err
	}
	startProfile, err := profileStarter(fsys, mode, root)
	if err != nil {
		return nil, nil, err
	}
	return startProfile, startBPF, nil
}
