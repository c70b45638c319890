package analysis_test

import (
	"fmt"
	"testing"

	"github.com/gpufeed/gpufeed/internal/trace/kineto"
)

func TestGapLook(t *testing.T) {
	tr, _ := kineto.DecodeFile("/work/shared/traces/negative_queue_length_values_check/rank0.json.gz", kineto.Options{})
	var base int64 = 1683564901552104000
	gs := base + 458063000
	ge := gs + 64325000
	for _, g := range tr.GPU {
		if g.End > gs-2000000 && g.Start < ge+200000 {
			l := ""
			if g.Launch >= 0 {
				r := tr.Runtime[g.Launch]
				l = fmt.Sprintf("launched %s at %+.3f..%+.3f", tr.Name(r.Name), float64(r.Start-gs)/1e6, float64(r.End-gs)/1e6)
			}
			n := tr.Name(g.Name)
			fmt.Printf("GPU s%d %+.3f..%+.3f %s %s\n", tr.Streams[g.Stream].ID, float64(g.Start-gs)/1e6, float64(g.End-gs)/1e6, n[:min(50, len(n))], l)
		}
	}
	for _, r := range tr.Runtime {
		if r.End > gs && r.Start < ge && r.Dur() > 100000 {
			fmt.Printf("RT th%d %+.3f..%+.3f %s\n", tr.Threads[r.Thread].TID, float64(r.Start-gs)/1e6, float64(r.End-gs)/1e6, tr.Name(r.Name))
		}
	}
}
