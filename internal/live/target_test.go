package live

import (
	"context"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

// The view names an attached target once: "pid N (comm)", not
// "pid N (pid N (comm))".
func TestAttachedTargetNamedOnce(t *testing.T) {
	c := exec.Command("sleep", "30")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Process.Kill(); c.Wait() })
	fs, err := procfs.NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var got string
	_, err = Run(ctx, Options{FS: fs, PID: c.Process.Pid, Interval: 100 * time.Millisecond, Refresh: 200 * time.Millisecond, Span: 2 * time.Second},
		func(u Update) {
			if got == "" {
				got = u.Target
				cancel()
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if want := "pid " + strconv.Itoa(c.Process.Pid) + " (sleep)"; got != want {
		t.Errorf("target %q, want %q", got, want)
	}
}
