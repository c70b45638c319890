package tracestats

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestDescribeMatchesPandas(t *testing.T) {
	// pandas: pd.Series([1, 2, 3, 4, 10]).describe()
	d := describe([]float64{10, 2, 4, 1, 3})
	want := Dist{Count: 5, Mean: 4, Std: 3.5355339059327378, Min: 1, P25: 2, P50: 3, P75: 4, P95: 8.8, Max: 10}
	if math.Abs(d.Std-want.Std) > 1e-12 || d.Count != want.Count || d.Mean != want.Mean || d.Min != want.Min ||
		d.P25 != want.P25 || d.P50 != want.P50 || d.P75 != want.P75 || math.Abs(d.P95-want.P95) > 1e-12 || d.Max != want.Max {
		t.Errorf("describe = %+v, want %+v", d, want)
	}
}

func TestDescribeHistogramEqualsDescribe(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		n := 1 + r.IntN(500)
		var vals []float64
		var hist []int
		for range n {
			v := r.IntN(40)
			vals = append(vals, float64(v))
			for len(hist) <= v {
				hist = append(hist, 0)
			}
			hist[v]++
		}
		a, b := describe(vals), describeHistogram(hist)
		close := func(x, y float64) bool { return math.Abs(x-y) <= 1e-9*math.Max(1, math.Abs(x)) }
		if a.Count != b.Count || !close(a.Mean, b.Mean) || !close(a.Std, b.Std) || a.Min != b.Min || a.Max != b.Max ||
			!close(a.P25, b.P25) || !close(a.P50, b.P50) || !close(a.P75, b.P75) || !close(a.P95, b.P95) {
			t.Fatalf("histogram %+v, values %+v", b, a)
		}
	}
}
