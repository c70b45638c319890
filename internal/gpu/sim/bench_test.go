package sim_test

import (
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/simclient"
)

// BenchmarkLaunch measures one kernel launch end to end without its
// simulated CPU cost (GPUFEED_SIMDEV_LAUNCH_US=0): the cgo call, the
// library's stream arithmetic and ring record, and the server's reading of
// the ring and model update (same process, so the CPU reported covers both
// sides).
func BenchmarkLaunch(b *testing.B) {
	b.Setenv("GPUFEED_SIMDEV_LAUNCH_US", "0")
	path := startDevice(b, sim.Options{})
	c, err := simclient.Dial(path)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	b.ResetTimer()
	for b.Loop() {
		if err := c.Launch(time.Nanosecond, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := c.Synchronize(0); err != nil {
		b.Fatal(err)
	}
}
