package procfs

import (
	"errors"

	promfs "github.com/prometheus/procfs"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

func isTooLarge(err error) bool { return errors.Is(err, ErrTooLarge) }

// ReadCmdline returns the process's arguments (empty for kernel threads and
// zombies), through prometheus/procfs: it is read once per process (again
// after an exec), so procfs's allocations do not matter here. The secrets
// they hold are scrubbed here, where command lines enter gpufeed
// (safetext.ScrubArgs: --password=X, URL passwords, token shapes), so no
// report, recording or agent endpoint holds them.
func (fs FS) ReadCmdline(pid int) ([]string, error) {
	path := fs.PidPath(pid, "cmdline")
	pfs, err := promfs.NewFS(fs.Proc)
	if err != nil {
		return nil, err
	}
	p, err := pfs.Proc(pid)
	if err != nil {
		return nil, classify(path, PrivProcMount, ErrVanished, err)
	}
	args, err := p.CmdLine()
	if err != nil {
		return nil, classify(path, PrivProcMount, ErrVanished, err)
	}
	return safetext.ScrubArgs(args), nil
}
