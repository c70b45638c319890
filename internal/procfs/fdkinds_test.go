package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

func TestClassifyFD(t *testing.T) {
	cases := map[string]string{
		"socket:[99]":              FDSocket,
		"pipe:[1234]":              FDPipe,
		"anon_inode:[eventfd]":     FDAnonInode,
		"anon_inode:[eventpoll]":   FDAnonInode,
		"/memfd:pytorch (deleted)": FDMemfd,
		"/dev/nvidiactl":           FDNvidia,
		"/dev/nvidia-uvm":          FDNvidia,
		"/dev/null":                FDDevice,
		"/data/shards/00001.tar":   FDFile,
		"/tmp/x (deleted)":         FDFile,
		"net:[4026531840]":         FDOther,
		"":                         FDOther,
	}
	for in, want := range cases {
		if got := ClassifyFD(in); got != want {
			t.Errorf("ClassifyFD(%q) = %s, want %s", in, got, want)
		}
	}
}

// fixtureProc builds a /proc/PID/fd tree of links, as the kernel shows them.
func fdFixture(t *testing.T, pid int, targets []string) string {
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

func TestFDKindsFixture(t *testing.T) {
	targets := []string{"/dev/null", "pipe:[1]", "socket:[2]", "socket:[3]", "/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia0",
		"anon_inode:[eventfd]", "/data/a/1", "/data/a/2", "/data/a/3", "/data/b/1", "/x/y"}
	root := fdFixture(t, 42, targets)
	c, err := At(root, "").FDKinds(42, 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.Total != len(targets) || c.ByKind[FDSocket] != 2 || c.ByKind[FDNvidia] != 3 || c.ByKind[FDFile] != 5 || c.ByKind[FDDevice] != 1 {
		t.Errorf("%+v", c)
	}
	if len(c.TopDirs) != 3 || c.TopDirs[0] != (FDDirCount{"/data/a", 3}) || len(c.NvidiaNodes) != 2 {
		t.Errorf("top dirs %v nodes %v", c.TopDirs, c.NvidiaNodes)
	}
	if m := c.NVIDIAMinors(); len(m) != 1 || m[0] != 0 {
		t.Errorf("GPUs held open: %v, want [0] (/dev/nvidiactl is no GPU)", m)
	}
	if c, _ := At(root, "").FDKinds(42, 4); !c.Truncated || c.Total != 4 {
		t.Errorf("cap: %+v", c)
	}
	if _, err := At(root, "").FDKinds(43, 0); !errors.Is(err, ErrVanished) {
		t.Errorf("missing process: %v", err)
	}
}

func TestFDKindsSelf(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	c, err := At("", "").FDKinds(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if c.ByKind[FDPipe] < 2 {
		t.Errorf("this process holds a pipe's two ends: %+v", c)
	}
}
