package main

import (
	"bufio"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// memGrowWorkload: a parent that waits until it is in the memory cgroup
// named by argv[1], then forks a child growing its anonymous memory at
// 32 MiB/s (each page written), by the clock: 4 MiB at a time, as many as
// its age calls for, so that a wake-up delayed by a crowded host does not
// slow the growth (4 MiB per 0.1 s sleep grew 28 MiB/s beside other tests,
// faster once they ended, and the kill came 17 % sooner than the rate read
// during the window said); the parent reports when the child is killed and
// by which signal, and lives on.
const memGrowWorkload = `
import os, sys, time
path = sys.argv[1]
print("ready", flush=True)
while True:
    with open("/proc/self/cgroup") as f:
        if any(l.split(":", 2)[2].strip() == path for l in f if ":memory:" in l):
            break
    time.sleep(0.01)
pid = os.fork()
if pid == 0:
    held, t0 = [], time.monotonic()
    while True:
        while len(held) < int((time.monotonic() - t0) * 8) + 1:
            held.append(bytearray(b"\x01") * (4 << 20))
        time.sleep(0.02)
print("child", pid, time.time(), flush=True)
_, status = os.waitpid(pid, 0)
print("killed", time.time(), os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1, flush=True)
while True:
    time.sleep(1)
`

// TestAttachMemoryCgroupTimeLeftAndOOMKill: a process growing 32 MiB/s in
// a real cgroup v1 memory cgroup limited to 300 MiB, three times side by
// side (each in its own cgroup: growing memory takes little CPU). Attached
// for 2.5 s while
// it grows, the time left before the limit is within 20 % of the real time
// to the OOM kill; attached across the kill, the kill is named by member
// (the child's pid), from the cgroup's oom_kill count.
func TestAttachMemoryCgroupTimeLeftAndOOMKill(t *testing.T) {
	livetest.Need(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	gpufeed(t) // built before the clock starts: a build takes longer than the growth
	for round := range 3 {
		t.Run(strconv.Itoa(round), func(t *testing.T) {
			t.Parallel()
			cg, err := testjob.NewMemoryCgroup(fmt.Sprintf("gpufeed-test-mem-%d-%d", os.Getpid(), round), 300<<20)
			if errors.Is(err, testjob.ErrUnavailable) {
				t.Skip(err)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := cg.Remove(); err != nil {
					t.Error(err)
				}
			}()
			cmd := exec.Command(python, "-c", memGrowWorkload, cg.Path)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
			lines := make(chan []string, 4)
			go func() {
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					lines <- strings.Fields(sc.Text())
				}
				close(lines)
			}()
			if l := <-lines; len(l) == 0 || l[0] != "ready" {
				t.Fatalf("workload: %v", l)
			}
			if err := os.WriteFile(cg.ProcsFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
				t.Fatal(err)
			}
			child := <-lines
			if len(child) != 3 || child[0] != "child" {
				t.Fatalf("workload: %v", child)
			}
			time.Sleep(200 * time.Millisecond)
			// One short window while it grows (ending about 5 s before the
			// kill: the wake-up of the parent that times the kill on a
			// crowded host is a few hundred ms, a small part of that), one
			// across the kill, at once.
			type res struct{ runs []attachRun }
			short, long := make(chan res, 1), make(chan res, 1)
			go func() {
				short <- res{attachRepeatedly(t, cmd.Process.Pid, 1, []time.Duration{2500 * time.Millisecond})}
			}()
			go func() { long <- res{attachRepeatedly(t, cmd.Process.Pid, 1, []time.Duration{12 * time.Second})} }()
			var killed []string
			select {
			case killed = <-lines:
			case <-time.After(30 * time.Second):
				t.Fatal("the child was not killed within 30 s")
			}
			if len(killed) != 3 || killed[0] != "killed" || killed[2] != "9" {
				t.Fatalf("child ended: %v", killed)
			}
			killAt, _ := strconv.ParseFloat(killed[1], 64)

			s := (<-short).runs[0]
			if s.err != "" {
				t.Fatal(s.err)
			}
			f := findingByID(s.rep.Findings, "memory-cgroup-limit")
			if f == nil {
				for _, x := range s.rep.Findings {
					t.Logf("%s: %s", x.ID, x.Claim)
				}
				t.Fatalf("no memory-cgroup-limit finding: %v (killed %v)", findingIDs(s.rep.Findings), killed)
			}
			left, at := math.NaN(), time.Time{}
			for _, e := range f.Evidence {
				switch e.What {
				case "time left before the limit at this rate":
					left = e.Value
				case "last reading":
					at, _ = time.Parse(time.RFC3339Nano, e.Text)
				}
			}
			real := killAt - float64(at.UnixNano())/1e9
			t.Logf("%s; time left %.1f s at %s, killed %.2f s later", f.Claim, left, at.Format("15:04:05.000"), real)
			if at.IsZero() || math.IsNaN(left) || real <= 0 || math.Abs(left-real) > 0.2*real {
				t.Errorf("time left %.1f s, real time to the OOM kill %.2f s: want within 20 %%", left, real)
			}

			l := (<-long).runs[0]
			if l.err != "" {
				t.Fatal(l.err)
			}
			k := findingByID(l.rep.Findings, "memory-cgroup-oom-kill")
			if k == nil {
				t.Fatalf("no memory-cgroup-oom-kill finding: %v", findingIDs(l.rep.Findings))
			}
			t.Logf("%s", k.Claim)
			if !strings.Contains(k.Claim, "(pid "+child[1]) || k.Severity != finding.Critical {
				t.Errorf("kill not named by member pid %s: %s %s", child[1], k.Severity, k.Claim)
			}
		})
	}
}

func findingByID(fs []finding.Finding, id string) *finding.Finding {
	for i := range fs {
		if fs[i].ID == id {
			return &fs[i]
		}
	}
	return nil
}
