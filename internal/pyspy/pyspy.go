// Package pyspy reads Python stacks with py-spy (github.com/benfred/py-spy):
// `py-spy dump --nonblocking --pid PID` prints every Python thread's stack and which one
// holds the GIL, from outside the process (it reads the interpreter's
// memory; it needs CAP_SYS_PTRACE or root for another user's process).
// gpufeed runs it only when asked (`diagnose --py-stacks`); what it printed
// is parsed by profile.ParsePySpy.
package pyspy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/profile"
)

// ErrNotInstalled is returned when py-spy is not on PATH.
var ErrNotInstalled = errors.New("py-spy is not installed")

// Runner runs a command and returns its standard output.
type Runner func(ctx context.Context, name string, args ...string) ([]byte, error)

// DumpTimeout bounds one dump: reading the stacks takes milliseconds; a
// dump that takes seconds is stuck.
const DumpTimeout = 10 * time.Second

// Dump runs `py-spy dump --nonblocking --pid PID` (run may be nil for the
// real command) and returns its raw text and parsed processes. Without
// --nonblocking py-spy stops the target (ptrace) for the read; gpufeed never
// stops the job it watches, so a stack torn by the running target is
// accepted instead, as the built-in reader accepts it.
func Dump(ctx context.Context, pid int, run Runner) ([]byte, []profile.Process, error) {
	if run == nil {
		if _, err := exec.LookPath("py-spy"); err != nil {
			return nil, nil, fmt.Errorf("%w: %s", ErrNotInstalled, profile.PySpyInstallHint)
		}
		run = execRunner
	}
	ctx, cancel := context.WithTimeout(ctx, DumpTimeout)
	defer cancel()
	out, err := run(ctx, "py-spy", "dump", "--nonblocking", "--pid", strconv.Itoa(pid))
	if err != nil {
		return out, nil, fmt.Errorf("py-spy dump --nonblocking --pid %d: %w", pid, err)
	}
	procs, err := profile.ParsePySpy(bytes.NewReader(out))
	return out, procs, err
}

func execRunner(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && stderr.Len() > 0 {
		msg := stderr.String()
		if len(msg) > 500 {
			msg = msg[:500]
		}
		return out, fmt.Errorf("%w: %s", err, strings.TrimSpace(msg))
	}
	return out, err
}
