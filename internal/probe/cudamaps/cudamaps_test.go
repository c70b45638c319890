package cudamaps

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

func parseFile(t *testing.T, name string) Use {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, err := Parse(f, DefaultMaxBytes)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestCUDAProcess(t *testing.T) {
	u := parseFile(t, "cuda-process.maps")
	want := "/dev/nvidia1,/dev/nvidiactl,/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"
	if strings.Join(u.Objects, ",") != want || !u.Driver || !u.DeviceNodes || u.Truncated {
		t.Errorf("%+v", u)
	}
}

func TestNoCUDA(t *testing.T) {
	u := parseFile(t, "python-no-cuda.maps")
	if len(u.Objects) != 0 || u.Driver || u.DeviceNodes {
		t.Errorf("a Python process without CUDA: %+v", u)
	}
}

func TestCapAndOddLines(t *testing.T) {
	text := "00400000-00452000 r-xp 00000000 08:02 1 /opt/my libs/libcuda.so.1 (deleted)\nshort line\n\n"
	u, err := Parse(strings.NewReader(text), 1<<20)
	if err != nil || len(u.Objects) != 1 || u.Objects[0] != "/opt/my libs/libcuda.so.1" {
		t.Errorf("%+v %v", u, err)
	}
	big := strings.Repeat("20a200000-20a400000 rw-s 00000000 00:06 327 /dev/nvidia0\n", 1000)
	if u, _ := Parse(strings.NewReader(big), 4096); !u.Truncated || !u.DeviceNodes {
		t.Errorf("cap: %+v", u)
	}
}

func TestReadLiveAndGone(t *testing.T) {
	u, err := Read("/proc", os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if u.Driver {
		t.Errorf("the test binary maps no CUDA driver: %+v", u)
	}
	if _, err := Read(t.TempDir(), 1, 0); !errors.Is(err, ErrGone) {
		t.Errorf("missing process: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"cuda-process.maps", "python-no-cuda.maps"} {
		b, _ := os.ReadFile(filepath.Join("testdata", n))
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := Parse(strings.NewReader(s), 1<<16)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range u.Objects {
			if !isCUDA(o) {
				t.Errorf("%q is not a CUDA object", o)
			}
		}
	})
}

func TestCollectives(t *testing.T) {
	u := parseFile(t, "nccl-process.maps")
	want := timeline.NCCLShm + ",/usr/local/lib/python3.8/dist-packages/nvidia/nccl/lib/libnccl.so.2"
	if strings.Join(u.Collectives, ",") != want {
		t.Errorf("collectives %q, want %q", u.Collectives, want)
	}
	for _, c := range u.Collectives {
		if !timeline.IsNCCL(c) {
			t.Errorf("%s is NCCL", c)
		}
	}
	g := parseFile(t, "gloo-rank.maps")
	if strings.Join(g.Collectives, ",") != "/usr/lib/libgloo.so.0.5.0" || timeline.IsNCCL(g.Collectives[0]) || g.Driver {
		t.Errorf("a gloo rank: %+v", g)
	}
	if u := parseFile(t, "python-no-cuda.maps"); len(u.Collectives) != 0 {
		t.Errorf("plain Python: %+v", u.Collectives)
	}
}
