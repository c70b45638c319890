package procfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

// TestProcessCPUNSIsTheThreadsSum: a process's CPU clock is the sum of its
// threads' schedstat run time, read without permission asked; a fixture
// tree and a missing process are refused.
func TestProcessCPUNSIsTheThreadsSum(t *testing.T) {
	livetest.Need(t)
	fs, err := NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	if !fs.OwnPIDs() {
		t.Skip("/proc here is not this pid namespace's")
	}
	if At(t.TempDir(), "").OwnPIDs() {
		t.Error("a fixture tree taken as this pid namespace's procfs")
	}
	// A child that spins 300 ms in two threads, then sleeps.
	cmd := exec.Command("python3", "-c", `import threading, time
def spin():
    end = time.thread_time() + 0.15
    while time.thread_time() < end:
        pass
ts = [threading.Thread(target=spin) for _ in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
print("done", flush=True)
time.sleep(30)`)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Skip("python3:", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	buf := make([]byte, 5)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	pid := cmd.Process.Pid
	got, err := ProcessCPUNS(pid)
	if err != nil {
		t.Fatal(err)
	}
	// The live threads' schedstat, plus the spinners that exited: the
	// clock keeps the dead threads' time, so it is at least the live sum
	// and at least the 300 ms spun.
	var live uint64
	tasks, _ := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	for _, d := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", d.Name(), "schedstat"))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.ParseUint(strings.Fields(string(b))[0], 10, 64)
		live += n
	}
	if got < live || got < 290e6 || got > 5e9 {
		t.Errorf("process clock %d ns; live threads' schedstat %d ns, 300 ms spun", got, live)
	}
	// Asleep, it does not move.
	again, _ := ProcessCPUNS(pid)
	if again != got {
		t.Errorf("a sleeping process's clock moved: %d then %d", got, again)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, err := ProcessCPUNS(pid); err == nil {
		t.Error("a reaped process's clock read")
	}
}
