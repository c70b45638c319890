package analysis

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
	d.P25, d.P50, d.P75, d.P95 = quantile(v, 0.25), quantile(v, 0.5), quantile(v, 0.75), quantile(v, 0.95)
	return d
}

// quantile is numpy's default (linear) quantile of sorted v.
func quantile(v []float64, q float64) float64 {
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
