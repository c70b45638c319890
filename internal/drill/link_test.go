package drill

import (
	"testing"

	"github.com/gpufeed/gpufeed/internal/procfs"
)

// A real device's link where NVML is not there: sysfs's current link of
// the function at CUDA's PCI address, here a GPU that trained at Gen3 x8
// of its Gen4 x16 (a fixture of a real server's sysfs).
func TestLinkFromSysfsAtCUDAsAddress(t *testing.T) {
	fs := procfs.At("", "../../testdata/check/server-downgraded/sys")
	b := &Backend{BusID: sysfsBusID("00000000:92:00.0")}
	l, err := b.Link(fs)
	if err != nil {
		t.Fatal(err)
	}
	if l.Gen != 3 || l.Width != 8 || l.MaxGen != 4 || l.MaxWidth != 16 {
		t.Errorf("link %+v, want Gen3 x8 of Gen4 x16", l)
	}
	if l.BytesPerSec() < 7.8e9 || l.BytesPerSec() > 7.9e9 {
		t.Errorf("Gen3 x8 at %.2f GB/s, want 7.88", l.BytesPerSec()/1e9)
	}
	if _, err := (&Backend{BusID: "0000:99:00.0"}).Link(fs); err == nil {
		t.Error("an address with no sysfs function: want an error")
	}
}

func TestSysfsBusID(t *testing.T) {
	for in, want := range map[string]string{"0000:81:00.0": "0000:81:00.0", "00000000:81:00.0": "0000:81:00.0", "0000:0A:00.0\n": "0000:0a:00.0"} {
		if got := sysfsBusID(in); got != want {
			t.Errorf("sysfsBusID(%q) = %q, want %q", in, got, want)
		}
	}
}
