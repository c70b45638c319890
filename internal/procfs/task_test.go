package procfs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Real stat lines (Linux 6.18): kthreadd, and a sleep that exited 0 and
// was not reaped.
const (
	kthreadStat = "2 (kthreadd) S 0 0 0 0 -1 2129984 0 0 0 0 0 0 0 0 20 0 1 0 25 0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	zombieStat  = "22372 (sleep) Z 22370 22361 16359 0 -1 4227084 132 0 0 0 0 0 0 0 20 0 1 0 57352 0 0 18446744073709551615 0 0 0 0 0 0 0 6 0 1 0 0 17 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
)

func TestParseTask(t *testing.T) {
	k, err := parseTask("stat", []byte(kthreadStat))
	if err != nil || !k.KernelThread || k.Comm != "kthreadd" || k.PPID != 0 {
		t.Errorf("kthreadd: %+v %v", k, err)
	}
	z, err := parseTask("stat", []byte(zombieStat))
	if err != nil || z.KernelThread || z.State != 'Z' || !z.HasExit || z.ExitCode != 0 || z.ExitSignal != 0 {
		t.Errorf("zombie: %+v %v", z, err)
	}
	// Killed by SIGKILL: waitpid status 9; exit 3: 0x300.
	killed := strings.Replace(zombieStat, " 0 0\n", " 0 9\n", 1)
	if z, _ := parseTask("stat", []byte(killed)); z.End() != "killed by SIGKILL (exit status 137)" {
		t.Errorf("killed: %q", z.End())
	}
	exited := strings.Replace(zombieStat, " 0 0\n", " 0 768\n", 1)
	if z, _ := parseTask("stat", []byte(exited)); z.End() != "exit status 3" || z.ShellStatus() != 3 {
		t.Errorf("exit 3: %q", z.End())
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2"} {
		if _, err := parseTask("stat", []byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// A real zombie, and a process whose main thread exited while another
// thread runs (its stat says Z too): only the first is a zombie.
func TestDescribeLiveZombie(t *testing.T) {
	cmd := exec.Command("sh", "-c", "sleep 0.05 & exec sleep 30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	fs, _ := NewFS("", "")
	var child int
	for deadline := time.Now().Add(5 * time.Second); child == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if task, err := fs.Describe(pid); err == nil && task.Zombie && task.PPID == cmd.Process.Pid {
				child = pid
			}
		}
	}
	if child == 0 {
		t.Fatal("no zombie seen")
	}
	task, _ := fs.Describe(child)
	if task.PPID != cmd.Process.Pid || task.End() != "exit status 0" {
		t.Errorf("%+v", task)
	}
	if self, err := fs.Describe(os.Getpid()); err != nil || self.Zombie || self.KernelThread {
		t.Errorf("this process: %+v %v", self, err)
	}
}

// leaderExit is a process whose main thread calls pthread_exit while a
// second thread goes on: /proc/PID/stat says Z, but the process runs.
const leaderExit = `#include <pthread.h>
#include <unistd.h>
static void *run(void *a) { (void)a; for (;;) pause(); return 0; }
int main(void) { pthread_t t; pthread_create(&t, 0, run, 0); write(1, "ready\n", 6); pthread_exit(0); }
`

func TestDescribeMainThreadExitedIsNotAZombie(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "leader.c"), filepath.Join(dir, "leader")
	os.WriteFile(src, []byte(leaderExit), 0o644)
	if out, err := exec.Command("gcc", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	buf := make([]byte, 6)
	out.Read(buf)
	fs, _ := NewFS("", "")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		task, err := fs.Describe(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if task.State == 'Z' {
			if task.Zombie {
				t.Fatalf("a process with a running thread called a zombie: %+v", task)
			}
			return
		}
	}
	t.Fatal("the main thread never showed Z")
}
