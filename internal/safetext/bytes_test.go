package safetext

import "testing"

// TestBytes holds the cases of the six formatters Bytes replaced, each
// with the precision its caller passes: render's tables and evidence (1,
// 2), the memory cgroup rule's claims (1, 2, where it wrote "0.0 MiB" for
// anything under 50 KiB), the frozen judge's and the BPF profile's claims
// and the recording reader's messages (1, 1), the platform checks' claims
// (0, 1).
func TestBytes(t *testing.T) {
	for _, c := range []struct {
		v               float64
		prec, precLarge int
		want            string
	}{
		// render.Bytes
		{-0.3, 1, 2, "0 B"}, {0.4, 1, 2, "0 B"}, {-2, 1, 2, "-2 B"}, {-2048, 1, 2, "-2.0 KiB"},
		{1536, 1, 2, "1.5 KiB"}, {11834, 1, 2, "11.6 KiB"}, {19.39 * (1 << 30), 1, 2, "19.39 GiB"}, {3 << 40, 1, 2, "3.00 TiB"},
		// the cgroup rule's fmtMiB: a limit, a growth rate
		{8 << 30, 1, 2, "8.00 GiB"}, {512 << 20, 1, 2, "512.0 MiB"}, {1.5 * (1 << 20), 1, 2, "1.5 MiB"},
		{20 << 10, 1, 2, "20.0 KiB"}, // was "0.0 MiB/s" of growth
		// frozen's fmtBytes and the BPF profile's bytesText
		{80.3 * (1 << 30), 1, 1, "80.3 GiB"}, {40 << 20, 1, 1, "40.0 MiB"}, {1023, 1, 1, "1023 B"}, {1024, 1, 1, "1.0 KiB"},
		{1023.7, 1, 1, "1024 B"}, {2 << 40, 1, 1, "2.0 TiB"},
		// the recording reader's sizeText (was "512 bytes" below a KiB)
		{100 << 20, 1, 1, "100.0 MiB"}, {1 << 20, 1, 1, "1.0 MiB"}, {512, 1, 1, "512 B"},
		// check's human
		{64 << 20, 0, 1, "64 MiB"}, {1.5 * (1 << 30), 0, 1, "1.5 GiB"}, {4096, 0, 1, "4 KiB"}, {100, 0, 1, "100 B"}, {0, 0, 1, "0 B"},
	} {
		if got := Bytes(c.v, c.prec, c.precLarge); got != c.want {
			t.Errorf("Bytes(%v, %d, %d) = %q, want %q", c.v, c.prec, c.precLarge, got, c.want)
		}
	}
}
