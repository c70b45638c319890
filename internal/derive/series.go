package derive

import (
	"math"
	"slices"
)

// Series holds one value per interval of the window (View.Intervals):
// Series[i] covers Ticks[i] to Ticks[i+1]. NaN marks an interval where the
// quantity was not measured (the thread did not exist yet, the slow tier had
// not run, the device was lost): never read NaN as zero.
type Series []float64

// Stats summarises the measured (non-NaN) values of a series.
type Stats struct {
	// N is the number of measured values; when 0 every other field is NaN.
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Min  float64 `json:"min"`
	P10  float64 `json:"p10"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P95  float64 `json:"p95"`
	Max  float64 `json:"max"`
}

// Stats computes the summary. Percentiles are nearest-rank: Pq is the
// smallest value with at least q% of the values at or below it.
func (s Series) Stats() Stats {
	v := make([]float64, 0, len(s))
	for _, x := range s {
		if !math.IsNaN(x) {
			v = append(v, x)
		}
	}
	return statsOf(v)
}

func statsOf(v []float64) Stats {
	if len(v) == 0 {
		nan := math.NaN()
		return Stats{Mean: nan, Min: nan, P10: nan, P50: nan, P90: nan, P95: nan, Max: nan}
	}
	slices.Sort(v)
	sum := 0.0
	for _, x := range v {
		sum += x
	}
	return Stats{N: len(v), Mean: sum / float64(len(v)), Min: v[0], Max: v[len(v)-1],
		P10: rank(v, 10), P50: rank(v, 50), P90: rank(v, 90), P95: rank(v, 95)}
}

func rank(sorted []float64, q float64) float64 {
	i := int(math.Ceil(q/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// Measured counts the non-NaN values.
func (s Series) Measured() int {
	n := 0
	for _, x := range s {
		if !math.IsNaN(x) {
			n++
		}
	}
	return n
}

// Mean is the mean of the measured values (NaN when none).
func (s Series) Mean() float64 { return s.Stats().Mean }

// FractionAbove is the share (0..1) of measured intervals whose value is
// above limit: "GPU < 10 % in more than half the datapoints".
func (s Series) FractionAbove(limit float64) float64 {
	n, k := 0, 0
	for _, x := range s {
		if math.IsNaN(x) {
			continue
		}
		n++
		if x > limit {
			k++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(k) / float64(n)
}

// FractionBelow is the share of measured intervals whose value is below limit.
func (s Series) FractionBelow(limit float64) float64 {
	n, k := 0, 0
	for _, x := range s {
		if math.IsNaN(x) {
			continue
		}
		n++
		if x < limit {
			k++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return float64(k) / float64(n)
}

// Add returns s + o element-wise, treating NaN in one operand as absent (a
// process's CPU is the sum of the threads that existed); NaN only where both are.
func (s Series) Add(o Series) Series {
	out := make(Series, max(len(s), len(o)))
	for i := range out {
		a, b := math.NaN(), math.NaN()
		if i < len(s) {
			a = s[i]
		}
		if i < len(o) {
			b = o[i]
		}
		switch {
		case math.IsNaN(a):
			out[i] = b
		case math.IsNaN(b):
			out[i] = a
		default:
			out[i] = a + b
		}
	}
	return out
}

func nanSeries(n int) Series {
	s := make(Series, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// Gauge holds one value per tick (View.TickT): a level such as RSS or
// fd count, NaN where not read on that tick.
type Gauge []float64

// Stats summarises the measured values.
func (g Gauge) Stats() Stats { return Series(g).Stats() }

// Last returns the last measured value and its tick index (-1 when none).
func (g Gauge) Last() (float64, int) {
	for i := len(g) - 1; i >= 0; i-- {
		if !math.IsNaN(g[i]) {
			return g[i], i
		}
	}
	return math.NaN(), -1
}

// First returns the first measured value and its tick index (-1 when none).
func (g Gauge) First() (float64, int) {
	for i, x := range g {
		if !math.IsNaN(x) {
			return x, i
		}
	}
	return math.NaN(), -1
}

func nanGauge(n int) Gauge { return Gauge(nanSeries(n)) }

// Slope is the least-squares growth rate of a gauge per second, using the
// tick times t (ns); NaN with fewer than two measured points.
func (g Gauge) Slope(t []int64) float64 {
	var n, sx, sy, sxx, sxy float64
	for i, y := range g {
		if math.IsNaN(y) || i >= len(t) {
			continue
		}
		x := float64(t[i]) / 1e9
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	d := n*sxx - sx*sx
	if n < 2 || d == 0 {
		return math.NaN()
	}
	return (n*sxy - sx*sy) / d
}

// rateSeries spreads a cumulative counter read on some ticks (vals[k] at tick
// idx[k]) into per-interval rates per second: every interval between two
// readings carries the rate over that span. Intervals outside any span are NaN.
// scale multiplies the rate (e.g. 100 for a percentage of a per-second share).
func rateSeries(nIntervals int, tickT []int64, idx []int, vals []float64, scale float64) Series {
	s := nanSeries(nIntervals)
	for k := 1; k < len(idx); k++ {
		a, b := idx[k-1], idx[k]
		dt := float64(tickT[b]-tickT[a]) / 1e9
		dv := vals[k] - vals[k-1]
		if dt <= 0 || dv < 0 {
			continue // a counter that went backwards was reset: no rate
		}
		r := dv / dt * scale
		for i := a; i < b && i < nIntervals; i++ {
			s[i] = r
		}
	}
	return s
}
