package safetext

import (
	"strings"
	"time"
)

// Duration writes a duration as a flag takes it back, without the zero
// tails time.Duration's String leaves: "3m20s", "10m", "1h", "100ms". It is
// the one duration formatter of what a user is told to type (--interval,
// --duration).
func Duration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
