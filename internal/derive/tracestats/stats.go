package tracestats

import (
	"math"
	"slices"
)

// Dist summarises a sample of values the way pandas' describe() does
// (HTA prints describe() tables): count, mean, sample standard deviation,
// min, quartiles with linear interpolation, max.
type Dist struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Std   float64 `json:"std"`
	Min   float64 `json:"min"`
	P25   float64 `json:"p25"`
	P50   float64 `json:"p50"`
	P75   float64 `json:"p75"`
	P95   float64 `json:"p95"`
	Max   float64 `json:"max"`
}

// describe computes Dist; it sorts v.
func describe(v []float64) Dist {
	if len(v) == 0 {
		return Dist{}
	}
	slices.Sort(v)
	d := Dist{Count: len(v), Min: v[0], Max: v[len(v)-1]}
	var sum float64
	for _, x := range v {
		sum += x
	}
	d.Mean = sum / float64(len(v))
	if len(v) > 1 {
		var ss float64
		for _, x := range v {
			ss += (x - d.Mean) * (x - d.Mean)
		}
		d.Std = math.Sqrt(ss / float64(len(v)-1))
	}
	d.P25, d.P50, d.P75, d.P95 = Quantile(v, 0.25), Quantile(v, 0.5), Quantile(v, 0.75), Quantile(v, 0.95)
	return d
}

// Quantile is numpy's default (linear) quantile of sorted v.
func Quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	pos := q * float64(len(v)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	if lo == hi {
		return v[lo]
	}
	return v[lo] + (v[hi]-v[lo])*(pos-float64(lo))
}

// describeHistogram is describe for integer values given as counts:
// hist[v] is how many times v occurred.
func describeHistogram(hist []int) Dist {
	n := 0
	var sum float64
	for v, c := range hist {
		n += c
		sum += float64(v) * float64(c)
	}
	if n == 0 {
		return Dist{}
	}
	d := Dist{Count: n, Mean: sum / float64(n)}
	if n > 1 {
		var ss float64
		for v, c := range hist {
			ss += float64(c) * (float64(v) - d.Mean) * (float64(v) - d.Mean)
		}
		d.Std = math.Sqrt(ss / float64(n-1))
	}
	// at returns the k-th smallest value (0-based).
	at := func(k int) float64 {
		for v, c := range hist {
			if k < c {
				return float64(v)
			}
			k -= c
		}
		return float64(len(hist) - 1)
	}
	q := func(p float64) float64 {
		pos := p * float64(n-1)
		lo, hi := int(math.Floor(pos)), int(math.Ceil(pos))
		a, b := at(lo), at(hi)
		return a + (b-a)*(pos-float64(lo))
	}
	d.Min, d.Max = at(0), at(n-1)
	d.P25, d.P50, d.P75, d.P95 = q(0.25), q(0.5), q(0.75), q(0.95)
	return d
}
