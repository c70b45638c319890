package fdkinds

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestClassify(t *testing.T) {
	cases := map[string]string{
		"socket:[99]":              Socket,
		"pipe:[1234]":              Pipe,
		"anon_inode:[eventfd]":     AnonInode,
		"anon_inode:[eventpoll]":   AnonInode,
		"/memfd:pytorch (deleted)": Memfd,
		"/dev/nvidiactl":           Nvidia,
		"/dev/nvidia-uvm":          Nvidia,
		"/dev/null":                Device,
		"/data/shards/00001.tar":   File,
		"/tmp/x (deleted)":         File,
		"net:[4026531840]":         Other,
		"":                         Other,
	}
	for in, want := range cases {
		if got := Classify(in); got != want {
			t.Errorf("Classify(%q) = %s, want %s", in, got, want)
		}
	}
}

// fixtureProc builds a /proc/PID/fd tree of links, as the kernel shows them.
func fixtureProc(t *testing.T, pid int, targets []string) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, strconv.Itoa(pid), "fd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, tg := range targets {
		if err := os.Symlink(tg, filepath.Join(dir, strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestReadFixture(t *testing.T) {
	targets := []string{"/dev/null", "pipe:[1]", "socket:[2]", "socket:[3]", "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia0",
		"anon_inode:[eventfd]", "/data/a/1", "/data/a/2", "/data/a/3", "/data/b/1", "/x/y"}
	root := fixtureProc(t, 42, targets)
	c, err := Read(root, 42, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Total != len(targets) || c.ByKind[Socket] != 2 || c.ByKind[Nvidia] != 3 || c.ByKind[File] != 5 || c.ByKind[Device] != 1 {
		t.Errorf("%+v", c)
	}
	if len(c.TopDirs) != 3 || c.TopDirs[0] != (DirCount{"/data/a", 3}) || len(c.NvidiaNodes) != 2 {
		t.Errorf("top dirs %v nodes %v", c.TopDirs, c.NvidiaNodes)
	}
	if c, _ := Read(root, 42, 4); !c.Truncated || c.Total != 4 {
		t.Errorf("cap: %+v", c)
	}
	if _, err := Read(root, 43, 0); !errors.Is(err, ErrGone) {
		t.Errorf("missing process: %v", err)
	}
}

func TestReadSelf(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	c, err := Read("/proc", os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.ByKind[Pipe] < 2 {
		t.Errorf("this process holds a pipe's two ends: %+v", c)
	}
}
