package procfs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/elf holds three shared objects built from drv.c and user.c with
// gcc -shared -fPIC -O2 -s: drv-gnuhash.so (DT_GNU_HASH, gcc's default)
// and drv-sysvhash.so (-Wl,--hash-style=sysv) define cuInit; user.so calls
// cuInit without defining it and defines cuInitX.
func TestExportsSymbol(t *testing.T) {
	for _, c := range []struct {
		file, name string
		want       bool
	}{
		{"drv-gnuhash.so", "cuInit", true},
		{"drv-sysvhash.so", "cuInit", true},
		{"drv-gnuhash.so", "cuDeviceGetCount", true},
		{"drv-gnuhash.so", "cuInitHidden", false}, // static: not exported
		{"drv-sysvhash.so", "cuInitHidden", false},
		{"drv-gnuhash.so", "cuIni", false},
		{"user.so", "cuInit", false}, // undefined: imported, not exported
		{"user.so", "cuInitX", true},
		{"drv.c", "cuInit", false}, // not ELF
	} {
		f, err := os.Open(filepath.Join("testdata", "elf", c.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := ExportsSymbol(f, c.name)
		f.Close()
		if err != nil || got != c.want {
			t.Errorf("%s exports %s: %v, %v; want %v", c.file, c.name, got, err, c.want)
		}
	}
}

// TestDriverAPILibrariesOfALiveProcess: a Python process that dlopens a
// library exporting cuInit, and one not exporting it, is seen mapping the
// first as a driver, through /proc/PID/maps and map_files.
func TestDriverAPILibrariesOfALiveProcess(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	drv, user := filepath.Join(dir, "libshim-drv.so"), filepath.Join(dir, "libother.so")
	for src, dst := range map[string]string{"drv-gnuhash.so": drv, "user.so": user} {
		b, err := os.ReadFile(filepath.Join("testdata", "elf", src))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(py, "-c", `import ctypes, sys
ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)
ctypes.CDLL(sys.argv[2])
print("ready", flush=True)
sys.stdin.read()`, drv, user)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "ready\n" {
		t.Fatalf("python: %q", line)
	}
	fs, _ := NewFS("", "")
	m, err := fs.Mappings(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, o := range m.Executables {
		paths = append(paths, o.Path)
	}
	if !strings.Contains(strings.Join(paths, " "), user) {
		t.Errorf("executable mappings %v lack %s", paths, user)
	}
	for range 2 { // the second answer comes from the cache
		got := fs.DriverAPILibraries(cmd.Process.Pid, m.Executables)
		if len(got) != 1 || got[0] != drv {
			t.Errorf("driver API libraries %v, want [%s]", got, drv)
		}
	}
}

func FuzzExportsSymbol(f *testing.F) {
	for _, name := range []string{"drv-gnuhash.so", "drv-sysvhash.so", "user.so"} {
		b, err := os.ReadFile(filepath.Join("testdata", "elf", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ExportsSymbol(bytes.NewReader(b), "cuInit")
	})
}
