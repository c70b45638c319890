package sim_test

import (
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu/sim"
)

// BenchmarkLaunch measures one kernel launch end to end: the client's one
// write(2) and the server's read and model update (same process, so the CPU
// reported covers both sides). The kernels are long enough that the stream
// stays busy: the server's cost must not grow with a busy device.
func BenchmarkLaunch(b *testing.B) {
	path := startDevice(b, sim.Options{MaxPending: 1 << 30})
	c, err := simDial(path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ResetTimer()
	for b.Loop() {
		if err := c.Launch(10*time.Microsecond, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := c.Synchronize(0); err != nil {
		b.Fatal(err)
	}
}
