package drill

import (
	"context"
	"math"
	"testing"

	"github.com/gpufeed/gpufeed/internal/drillresult"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/sim"
)

func simBackend(t *testing.T) *Backend {
	t.Helper()
	b, _, err := Open(context.Background(), "sim", 0, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func row(t *testing.T, tab drillresult.Table, key string) drillresult.Row {
	t.Helper()
	for _, r := range tab.Rows {
		if r.Key == key {
			return r
		}
	}
	t.Fatalf("no row %s in %s", key, tab.ID)
	return drillresult.Row{}
}

// On the simulator a CUDA graph replay costs the CPU one launch, and the
// GPU runs its kernels back to back: the graph row's wall time is the
// kernels' total GPU time, within 10 %, as the model says. Launched one by
// one, the same kernels take each a launch's CPU time: the quiet row is
// launch-bound, well above the GPU time.
func TestJitterGraphRowIsTheGPUTime(t *testing.T) {
	b := simBackend(t)
	fs, err := procfs.NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	const kernels, kernelNS = 2000, 885
	var lastErr string
	for try := 0; try < 3; try++ { // other work on a shared machine can delay a wake-up
		rep, err := Jitter(context.Background(), b, fs, JitterOptions{Kernels: kernels, Reps: 5, KernelNS: kernelNS, CPU: -1})
		if err != nil {
			t.Fatal(err)
		}
		tab := rep.Tables[0]
		gpu := float64(kernels * kernelNS)
		graph := row(t, tab, "graph").Measured[0].Value
		quiet := row(t, tab, "quiet").Measured[0].Value
		t.Logf("try %d: graph %.3f ms, quiet %.3f ms, GPU %.3f ms", try, graph/1e6, quiet/1e6, gpu/1e6)
		if quiet < 2*gpu {
			t.Fatalf("quiet row %.3f ms: launched one by one at the simulated 5 µs launch cost, 2000 kernels take over 10 ms", quiet/1e6)
		}
		if math.Abs(graph-gpu) <= 0.1*gpu {
			return
		}
		lastErr = "graph row wall time is not within 10 % of the GPU time"
	}
	t.Error(lastErr)
}
