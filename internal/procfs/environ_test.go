package procfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

// ReadEnvSettled reads again an environ that is empty: on a fixture tree
// whose file is filled 30 ms after the first read, it returns the filled
// variables; one that stays empty costs EnvSettleTries reads and gives an
// empty environment, not an error; a missing process is still an error.
func TestReadEnvSettledWaitsOutAnEmptyEnviron(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "7"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "7", "environ")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fs := At(root, t.TempDir())
	go func() {
		time.Sleep(30 * time.Millisecond)
		_ = os.WriteFile(path+".new", []byte("HOME=/root\x00GPUFEED_SIMDEV=/run/gpu.sock\x00"), 0o644)
		_ = os.Rename(path+".new", path)
	}()
	env, err := fs.ReadEnvSettled(7)
	if err != nil {
		t.Fatal(err)
	}
	if env["GPUFEED_SIMDEV"] != "/run/gpu.sock" || env["HOME"] != "" {
		t.Errorf("environment %v: want GPUFEED_SIMDEV only, read after the file filled", env)
	}

	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	env, err = fs.ReadEnvSettled(7)
	if err != nil || len(env) != 0 {
		t.Errorf("an environ that stays empty: %v, %v; want an empty environment", env, err)
	}
	if d := time.Since(t0); d < (EnvSettleTries-1)*EnvSettleGap {
		t.Errorf("an environ that stays empty was given up after %v, before %d reads %v apart", d, EnvSettleTries, EnvSettleGap)
	}
	if _, err := fs.ReadEnvSettled(8); !IsVanished(err) {
		t.Errorf("a missing process: %v, want it reported as gone", err)
	}
}

// A process in the middle of an exec shows an empty environ (the kernel
// has switched to the new program's memory and not yet laid out its
// environment). A shell that execs itself 150 times, 30 ms apart, is read
// until a plain read has come back empty at least 5 times; right after each
// empty read, ReadEnvSettled must return the variable every generation
// carries.
func TestReadEnvSettledAcrossRealExecs(t *testing.T) {
	livetest.Need(t)
	script := filepath.Join(t.TempDir(), "reexec.sh")
	const body = `n=${N:-0}
if [ "$n" -lt 150 ]; then sleep 0.03; N=$((n+1)) exec /bin/sh "$0"; fi
`
	if err := os.WriteFile(script, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	c := exec.Command("/bin/sh", script)
	c.Env = []string{"PATH=/usr/bin:/bin", "GPUFEED_SIMDEV=/run/gpu.sock"}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = c.Wait(); close(done) }()
	t.Cleanup(func() { _ = c.Process.Kill(); <-done })
	fs := At("", "")
	empties, settled := 0, 0
	for empties < 5 {
		select {
		case <-done:
			t.Fatalf("the shell's 150 execs ended with %d empty reads of its environ seen: the window this test is about was not met", empties)
		default:
		}
		b, err := fs.readEnviron(c.Process.Pid)
		if err != nil || len(b) > 0 {
			continue
		}
		empties++
		env, err := fs.ReadEnvSettled(c.Process.Pid)
		if err != nil {
			t.Fatalf("read after an empty environ: %v", err)
		}
		if env["GPUFEED_SIMDEV"] != "/run/gpu.sock" {
			t.Errorf("after an empty read mid-exec, the settled environment is %v", env)
		} else {
			settled++
		}
	}
	t.Logf("%d empty reads mid-exec, %d settled to the variable", empties, settled)
}
