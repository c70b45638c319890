package gpu

import (
	"math"
	"testing"
)

func TestPCIeLinkBytesPerSec(t *testing.T) {
	for _, c := range []struct {
		gen, width int
		want       float64 // GB/s, the figures PCI-SIG publishes per direction
		ok         bool
	}{
		{1, 16, 4.0, true},
		{3, 16, 15.754, true},
		{4, 16, 31.508, true},
		{5, 8, 31.508, true},
		{4, 4, 7.877, true},
		{7, 16, 0, false},
		{4, 3, 0, false},
		{0, 16, 0, false},
	} {
		got, ok := PCIeLinkBytesPerSec(c.gen, c.width)
		if ok != c.ok || math.Abs(got/1e9-c.want) > 0.001 {
			t.Errorf("Gen%d x%d: %.4g GB/s %v, want %.4g %v", c.gen, c.width, got/1e9, ok, c.want, c.ok)
		}
	}
}
