package procfs

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

func mapsFile(t *testing.T, name string) Mappings {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "maps", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, err := ParseMaps(f, MaxMapsBytes)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestMapsCUDAProcess(t *testing.T) {
	u := mapsFile(t, "cuda-process.maps")
	want := "/dev/nvidia1,/dev/nvidiactl,/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"
	if strings.Join(u.Objects, ",") != want || !u.Driver || !u.DeviceNodes || u.Truncated {
		t.Errorf("%+v", u)
	}
}

func TestMapsNoCUDA(t *testing.T) {
	u := mapsFile(t, "python-no-cuda.maps")
	if len(u.Objects) != 0 || u.Driver || u.DeviceNodes {
		t.Errorf("a Python process without CUDA: %+v", u)
	}
}

func TestMapsCapAndOddLines(t *testing.T) {
	text := "00400000-00452000 r-xp 00000000 08:02 1 /opt/my libs/libcuda.so.1 (deleted)\nshort line\n\n"
	u, err := ParseMaps(strings.NewReader(text), 1<<20)
	if err != nil || len(u.Objects) != 1 || u.Objects[0] != "/opt/my libs/libcuda.so.1" {
		t.Errorf("%+v %v", u, err)
	}
	big := strings.Repeat("20a200000-20a400000 rw-s 00000000 00:06 327 /dev/nvidia0\n", 1000)
	if u, _ := ParseMaps(strings.NewReader(big), 4096); !u.Truncated || !u.DeviceNodes {
		t.Errorf("cap: %+v", u)
	}
}

func TestMapsReadLiveAndGone(t *testing.T) {
	u, err := At("", "").Mappings(os.Getpid(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if u.Driver {
		t.Errorf("the test binary maps no CUDA driver: %+v", u)
	}
	if _, err := At(t.TempDir(), "").Mappings(1, 0); !errors.Is(err, ErrVanished) {
		t.Errorf("missing process: %v", err)
	}
}

func FuzzParseMaps(f *testing.F) {
	for _, n := range []string{"cuda-process.maps", "python-no-cuda.maps"} {
		b, _ := os.ReadFile(filepath.Join("testdata", "maps", n))
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseMaps(strings.NewReader(s), 1<<16)
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

func TestMapsCollectives(t *testing.T) {
	u := mapsFile(t, "nccl-process.maps")
	want := timeline.NCCLShm + ",/usr/local/lib/python3.8/dist-packages/nvidia/nccl/lib/libnccl.so.2"
	if strings.Join(u.Collectives, ",") != want {
		t.Errorf("collectives %q, want %q", u.Collectives, want)
	}
	for _, c := range u.Collectives {
		if !timeline.IsNCCL(c) {
			t.Errorf("%s is NCCL", c)
		}
	}
	g := mapsFile(t, "gloo-rank.maps")
	if strings.Join(g.Collectives, ",") != "/usr/lib/libgloo.so.0.5.0" || timeline.IsNCCL(g.Collectives[0]) || g.Driver {
		t.Errorf("a gloo rank: %+v", g)
	}
	if u := mapsFile(t, "python-no-cuda.maps"); len(u.Collectives) != 0 {
		t.Errorf("plain Python: %+v", u.Collectives)
	}
}
