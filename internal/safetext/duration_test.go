package safetext

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		100 * time.Millisecond:               "100ms",
		200 * time.Second:                    "3m20s",
		10 * time.Minute:                     "10m",
		time.Hour:                            "1h",
		time.Hour + 30*time.Second:           "1h0m30s",
		90 * time.Minute:                     "1h30m",
		2*time.Second + 500*time.Millisecond: "2.5s",
	} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}
