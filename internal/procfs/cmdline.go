package procfs

import (
	"errors"

	promfs "github.com/prometheus/procfs"
)

func isTooLarge(err error) bool { return errors.Is(err, ErrTooLarge) }

// ReadCmdline returns the process's arguments (empty for kernel threads and
// zombies), through prometheus/procfs: it is read once per process (again
// after an exec), so procfs's allocations do not matter here.
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
	return args, nil
}
