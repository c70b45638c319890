package pysample

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// TestMain lets the test binary run as a child reader under another uid
// (TestDeniedSaysWhichPrivilege).
func TestMain(m *testing.M) {
	if pid := os.Getenv("GPUFEED_PYSTACK_CHILD_PID"); pid != "" {
		n, _ := strconv.Atoi(pid)
		_, err := Open(procfs.At("/proc", "/sys"), n)
		fmt.Println(err)
		if procfs.IsDenied(err) {
			os.Exit(3)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Reading another user's process without CAP_SYS_PTRACE is refused by the
// kernel; the reader says so with the privilege that would show it, never
// as an empty stack.
func TestDeniedSaysWhichPrivilege(t *testing.T) {
	livetest.Need(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to start a reader under another uid")
	}
	python := interpreters(t)["pyenv-3.11"]
	if python == "" {
		python = interpreters(t)["debian-python3"]
	}
	if python == "" {
		t.Skip("no CPython 3.11 on this machine")
	}
	k := startKnown(t, python)
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // testing's directories are private
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "reader")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	var out []byte
	err = livetest.WhileTextBusy(func() error {
		cmd := exec.Command(bin)
		cmd.Dir = dir
		cmd.Env = []string{"GPUFEED_PYSTACK_CHILD_PID=" + strconv.Itoa(k.cmd.Process.Pid)}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		var err error
		out, err = cmd.CombinedOutput()
		return err
	})
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 || !strings.Contains(string(out), "not visible: needs CAP_SYS_PTRACE") {
		t.Fatalf("as uid 65534: %v: %s", err, out)
	}
}
