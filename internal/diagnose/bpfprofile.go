package diagnose

import (
	"errors"
	"os"
	"strconv"
	"time"

	"github.com/gpufeed/gpufeed/internal/bpfcap"
	"github.com/gpufeed/gpufeed/internal/driverprobe"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/syscalls"
)

// What a report without each eBPF measurement cannot say.
const (
	syscallsCannotTell = "the job's syscalls (ioctls per step, futex waits, polls on the DataLoader's queues) are not counted"
	driverCannotTell   = "launches per second and the time inside the CUDA driver's synchronisations are not measured"
)

// BPFStop stops the eBPF measurements and returns what they counted (or
// why each was not taken).
type BPFStop func() (*profile.SyscallSummary, *profile.DriverCalls)

// bpfStarter returns what starts, as the window starts, the syscall
// summary and the CUDA driver probes of the tree under root, beside the
// CPU profile and under the same mode: off takes neither; auto takes what
// is allowed and says what is missing for the rest; on fails here, before
// the window, naming what is missing.
func bpfStarter(fsys procfs.FS, mode string, root int) (func() BPFStop, error) {
	if mode == ProfileOff || mode == "" {
		return func() BPFStop {
			return func() (*profile.SyscallSummary, *profile.DriverCalls) {
				return &profile.SyscallSummary{State: profile.StateOff}, &profile.DriverCalls{State: profile.StateOff}
			}
		}, nil
	}
	scErr := syscalls.Check(fsys.Proc)
	drErr := driverprobe.Check(fsys.Proc)
	if mode == ProfileOn {
		if scErr != nil {
			return nil, scErr
		}
		if drErr != nil {
			return nil, drErr
		}
	}
	return func() BPFStop {
		pids := treePIDs(fsys, root)
		var sc *syscalls.Tracer
		var dr *driverprobe.Prober
		// Both loaded first (the verifier takes seconds on a loaded
		// host), then started one right after the other: the syscall
		// summary and the driver calls count over one window, and the
		// report's "one sleep per sync" reads the same in both.
		if scErr == nil {
			sc, scErr = syscalls.Load(pids, syscalls.Options{Proc: fsys.Proc})
		}
		if drErr == nil {
			dr, drErr = driverprobe.Load(pids, driverprobe.Options{Proc: fsys.Proc})
		}
		if dr != nil {
			if drErr = dr.Probe(); drErr != nil {
				dr = nil
			}
		}
		if sc != nil {
			if scErr = sc.Attach(); scErr != nil {
				sc = nil
			}
		}
		return func() (*profile.SyscallSummary, *profile.DriverCalls) {
			s := &profile.SyscallSummary{State: profile.StateUnavailable, Missing: missingOf(scErr)}
			if sc != nil {
				s = sc.Stop()
			}
			d := &profile.DriverCalls{State: profile.StateUnavailable, Missing: missingOf(drErr)}
			if dr != nil {
				d = dr.Stop()
			}
			return s, d
		}
	}, nil
}

// AwaitProbesRemoved waits, at most timeout, until the CUDA driver probes
// of every window are out of the kernel, and says whether they are: a
// process that diagnosed calls it before it exits (driverprobe.AwaitRemoval
// says why).
func AwaitProbesRemoved(timeout time.Duration) bool { return driverprobe.AwaitRemoval(timeout) }

// checkBPF fails when the syscall summary or the driver probes are not
// allowed, naming what is missing.
func checkBPF(fsys procfs.FS) error {
	if err := syscalls.Check(fsys.Proc); err != nil {
		return err
	}
	return driverprobe.Check(fsys.Proc)
}

func missingOf(err error) string {
	var u *bpfcap.Unavailable
	if errors.As(err, &u) {
		return u.Missing
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// treePIDs lists root and its descendants now (gpufeed's own process
// left out); children forked later are followed in the kernel.
func treePIDs(fsys procfs.FS, root int) []int {
	self := os.Getpid()
	out := []int{root}
	ents, err := os.ReadDir(fsys.Proc)
	if err != nil {
		return out
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == root || pid == self {
			continue
		}
		if inTree(fsys, pid, root) {
			out = append(out, pid)
		}
	}
	return out
}

// bpfNotes are the notes a report carries for the measurements not taken.
func bpfNotes(s *profile.SyscallSummary, d *profile.DriverCalls) []string {
	var notes []string
	if s != nil && s.State == profile.StateUnavailable {
		notes = append(notes, "syscall summary not taken: "+s.Missing+". Without it, "+syscallsCannotTell+".")
	}
	if d != nil && d.State == profile.StateUnavailable {
		notes = append(notes, "CUDA driver calls not counted: "+d.Missing+". Without them, "+driverCannotTell+".")
	}
	return notes
}
