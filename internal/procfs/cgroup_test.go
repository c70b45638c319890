package procfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/testjob"
)

// tree writes files under a temporary root.
func cgroupTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestMemCgroupV1TightestAncestor(t *testing.T) {
	root := cgroupTree(t, map[string]string{
		"proc/7/cgroup": "12:pids:/slurm/job1\n4:memory:/slurm/job1/step0\n1:name=systemd:/x\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes":                  "9223372036854771712\n",
		"sys/fs/cgroup/memory/slurm/memory.limit_in_bytes":            "9223372036854771712\n",
		"sys/fs/cgroup/memory/slurm/job1/memory.limit_in_bytes":       "68719476736\n",
		"sys/fs/cgroup/memory/slurm/job1/memory.usage_in_bytes":       "60000000000\n",
		"sys/fs/cgroup/memory/slurm/job1/step0/memory.limit_in_bytes": "9223372036854771712\n",
		"sys/fs/cgroup/memory/slurm/job1/step0/memory.usage_in_bytes": "59000000000\n",
	})
	l, err := At(filepath.Join(root, "proc"), filepath.Join(root, "sys")).MemCgroup(7)
	if err != nil {
		t.Fatal(err)
	}
	if l.Version != 1 || l.Path != "/slurm/job1/step0" || l.LimitBytes == nil || *l.LimitBytes != 64<<30 ||
		l.LimitAt != "/slurm/job1" || l.UsageBytes == nil || *l.UsageBytes != 60000000000 {
		t.Errorf("%+v", l)
	}
}

func TestMemCgroupV2MaxAndNone(t *testing.T) {
	root := cgroupTree(t, map[string]string{
		"proc/8/cgroup":                              "0::/kubepods/pod1/c1\n",
		"sys/fs/cgroup/cgroup.controllers":           "cpu memory\n",
		"sys/fs/cgroup/kubepods/memory.max":          "max\n",
		"sys/fs/cgroup/kubepods/pod1/memory.max":     "8589934592\n",
		"sys/fs/cgroup/kubepods/pod1/memory.current": "4294967296\n",
		"sys/fs/cgroup/kubepods/pod1/c1/memory.max":  "max\n",
		"proc/9/cgroup":                              "0::/free\n",
		"sys/fs/cgroup/free/memory.max":              "max\n",
		"sys/fs/cgroup/free/memory.current":          "1024\n",
		"proc/10/cgroup":                             "0::/bad\n",
		"sys/fs/cgroup/bad/memory.max":               "lots\n",
	})
	l, err := At(filepath.Join(root, "proc"), filepath.Join(root, "sys")).MemCgroup(8)
	if err != nil || l.Version != 2 || *l.LimitBytes != 8<<30 || l.LimitAt != "/kubepods/pod1" || *l.UsageBytes != 4<<30 {
		t.Errorf("%+v %v", l, err)
	}
	l, err = At(filepath.Join(root, "proc"), filepath.Join(root, "sys")).MemCgroup(9)
	if err != nil || l.LimitBytes != nil || l.UsageBytes == nil || *l.UsageBytes != 1024 {
		t.Errorf("no limit: %+v %v", l, err)
	}
	if l, _ := At(filepath.Join(root, "proc"), filepath.Join(root, "sys")).MemCgroup(10); l.LimitBytes != nil {
		t.Errorf("an unreadable limit is no limit: %+v", l)
	}
}

func TestMemCgroupMalformedCgroupFile(t *testing.T) {
	root := cgroupTree(t, map[string]string{"proc/1/cgroup": "garbage\n"})
	_, err := At(filepath.Join(root, "proc"), filepath.Join(root, "sys")).MemCgroup(1)
	if err == nil || !strings.Contains(err.Error(), "line 1") || !strings.Contains(err.Error(), "ID:CONTROLLERS:PATH") {
		t.Errorf("want an error naming the line and the expected form: %v", err)
	}
	root = cgroupTree(t, map[string]string{"proc/1/cgroup": "3:cpu:/\n"})
	if _, err := At(filepath.Join(root, "proc"), filepath.Join(root, "sys")).MemCgroup(1); !errors.Is(err, ErrNoMemCgroup) {
		t.Errorf("no memory controller: %v", err)
	}
}

// TestLiveMemoryCgroup reads the limit of a real process placed in a real
// memory cgroup with a known limit.
func TestMemCgroupLive(t *testing.T) {
	cg, err := testjob.NewMemoryCgroup("gpufeed-memlimit-test-"+strconv.Itoa(os.Getpid()), 96<<20)
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		cg.Remove()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if err := cg.Remove(); err != nil {
			t.Error(err)
		}
	})
	if err := os.WriteFile(cg.ProcsFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := At("/proc", "/sys").MemCgroup(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if l.Version != 1 || l.Path != cg.Path || l.LimitBytes == nil || *l.LimitBytes != 96<<20 || l.UsageBytes == nil {
		t.Errorf("%+v (cgroup %s)", l, cg.Path)
	}
}
