package diagnose

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

func TestProcFactsLive(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	st, err := procfs.At("", "").StartTime(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	self, _ := procfs.At("", "").StartTime(os.Getpid())
	tl := &timeline.Timeline{Procs: map[timeline.ProcKey]*timeline.ProcInfo{
		{PID: cmd.Process.Pid, StartTime: st}:   {Key: timeline.ProcKey{PID: cmd.Process.Pid, StartTime: st}},
		{PID: os.Getpid(), StartTime: self + 1}: {}, // pid reused: a different process now
		{PID: 1 << 30, StartTime: 5}:            {}, // gone
		{PID: 2, StartTime: 1}:                  {Exited: true},
	}}
	c := fillProcFacts(procfs.At("", ""), tl, 42)
	if c.Read != 1 || c.Gone != 2 {
		t.Errorf("counts %+v", c)
	}
	p := tl.Procs[timeline.ProcKey{PID: cmd.Process.Pid, StartTime: st}]
	if p.FDKinds == nil || p.FDKinds.T != 42 || p.CUDA == nil || p.CUDA.Initialised() || p.CUDA.Mapped == nil {
		t.Errorf("facts %+v %+v", p.FDKinds, p.CUDA)
	}
	if p.Listening == nil || len(p.Listening.Sockets) != 0 || p.Listening.T != 42 {
		t.Errorf("sleep listens on nothing, and that was read: %+v", p.Listening)
	}
	if _, err := os.Stat("/sys/fs/cgroup"); err == nil && p.MemCgroup == nil && p.NotVisible["mem_cgroup"] == "" {
		t.Errorf("no memory cgroup read and no reason given")
	}
}

func TestStartTimeParsesCommWithSpaces(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(dir+"/7", 0o755); err != nil {
		t.Fatal(err)
	}
	stat := "7 (a) b) c) S 1 7 7 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 12345 1000 100 18446744073709551615"
	if err := os.WriteFile(dir+"/7/stat", []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := procfs.At(dir, "").StartTime(7); err != nil || st != 12345 {
		t.Errorf("start time %d %v", st, err)
	}
	os.WriteFile(dir+"/7/stat", []byte("7 (x) S 1"), 0o644)
	if _, err := procfs.At(dir, "").StartTime(7); err == nil || !strings.Contains(err.Error(), "expected at least 22 fields") {
		t.Errorf("short stat: %v", err)
	}
}
