package render

import "testing"

func TestHumanBytesSigns(t *testing.T) {
	for v, want := range map[float64]string{-0.3: "0 B", 0.4: "0 B", -2: "-2 B", -2048: "-2.0 KiB", 1536: "1.5 KiB"} {
		if got := humanBytes(v); got != want {
			t.Errorf("humanBytes(%v) = %q, want %q", v, got, want)
		}
	}
}
