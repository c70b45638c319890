package render

import (
	"math"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/compare"
)

// The forked workers' copies move between two runs without a within-run
// spread (a level at each window's end): said in words, no noise claimed.
func TestCompareSaysWorkerCopies(t *testing.T) {
	m := func(v float64) *compare.Metric {
		return &compare.Metric{Key: "worker_cow_copied", Name: "forked workers' copied memory", Unit: "MiB",
			P10: math.NaN(), P50: math.NaN(), P90: math.NaN(), Mean: v, N: 100}
	}
	in := []*compare.Input{
		{File: "list.json", Kind: compare.KindReport, Run: &compare.Run{Comm: "python3", Metrics: []*compare.Metric{m(293.2)}}},
		{File: "numpy.json", Kind: compare.KindReport, Run: &compare.Run{Comm: "python3", Metrics: []*compare.Metric{m(17.8)}}},
	}
	r := compare.Compare(in)
	got := strings.Join(runSentences(r.Runs), "\n")
	want := "The forked workers' private copies of their parent's memory (copy-on-write) went from 293 MiB in list to 17.8 MiB in numpy (-275 MiB); a level at the end of each window, not a rate."
	if !strings.Contains(got, want) {
		t.Errorf("sentences:\n%s\nwant %q", got, want)
	}
}
