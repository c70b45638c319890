package drill

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/cpuset"
)

// Noise is a set of busy processes (a shell's `while :; do :; done`, which
// never sleeps), each on the CPUs it was given: the competition a launch
// thread meets on a busy node, made real.
type Noise struct {
	procs []*exec.Cmd
}

// StartNoise starts one busy process per entry of cpus: pinned to that one
// CPU when pin, else free to run anywhere this process may (the entry then
// only counts).
func StartNoise(cpus cpuset.Set, pin bool) (*Noise, error) {
	n := &Noise{}
	for _, c := range cpus {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			n.Stop()
			return nil, fmt.Errorf("starting a busy process: %w", err)
		}
		n.procs = append(n.procs, cmd)
		if pin {
			var set unix.CPUSet
			set.Set(c)
			if err := unix.SchedSetaffinity(cmd.Process.Pid, &set); err != nil {
				n.Stop()
				return nil, fmt.Errorf("pinning a busy process to CPU %d: %w", c, err)
			}
		}
	}
	// Let them start spinning (and the scheduler place them) before the
	// measurement does.
	time.Sleep(50 * time.Millisecond)
	return n, nil
}

// Len is how many busy processes run.
func (n *Noise) Len() int {
	if n == nil {
		return 0
	}
	return len(n.procs)
}

// Stop kills and reaps every busy process.
func (n *Noise) Stop() {
	if n == nil {
		return
	}
	for _, c := range n.procs {
		c.Process.Signal(os.Kill)
		c.Wait()
	}
	n.procs = nil
}
