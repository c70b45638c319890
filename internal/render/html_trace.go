package render

import (
	"fmt"
	"html/template"
	"math"

	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
)

func causesOf() []tracestats.Cause { return tracestats.Causes() }

// causeColor shades a trace's bins by the cause of most of their idle time:
// the host's causes warm, the device's cool.
var causeColor = map[tracestats.Cause]string{
	tracestats.CauseSync:          "rgba(150,80,200,0.22)",
	tracestats.CausePageableCopy:  "rgba(30,140,200,0.22)",
	tracestats.CauseSetup:         "rgba(120,120,120,0.18)",
	tracestats.CauseDataLoader:    "rgba(40,160,90,0.22)",
	tracestats.CauseLaunchAPI:     "rgba(230,120,30,0.25)",
	tracestats.CauseOtherAPI:      "rgba(230,190,30,0.25)",
	tracestats.CauseCPUOps:        "rgba(210,80,60,0.22)",
	tracestats.CauseUntraced:      "rgba(200,60,60,0.12)",
	tracestats.CauseLaunchLatency: "rgba(90,90,200,0.18)",
	tracestats.CauseGPUWait:       "rgba(60,170,190,0.20)",
	tracestats.CauseNoLaunch:      "rgba(160,160,160,0.15)",
}

// traceChart bins the GPU's busy share over [start, end): each gap's idle
// time falls in the bins it overlaps, split by cause as the gap's own time
// is; a bin is shaded by the cause that took most of its idle time. ok is
// false when the trace holds no span or its gaps were not kept.
func traceChart(i int, label string, start, end int64, gaps []tracestats.GapDetail) (chartData, htmlChart, bool) {
	if end <= start || gaps == nil {
		return chartData{}, htmlChart{}, false
	}
	bins := traceBins
	if span := end - start; span < int64(bins)*1000 {
		bins = max(1, int(span/1000)) // at least a microsecond a bin
	}
	width := float64(end-start) / float64(bins)
	devices := map[int32]bool{}
	idle := make([]float64, bins)
	byCause := make([][]float64, bins)
	for b := range byCause {
		byCause[b] = make([]float64, len(causesOf()))
	}
	for gi := range gaps {
		g := &gaps[gi]
		devices[g.Device] = true
		gs, ge := float64(g.StartNs-start), float64(g.StartNs-start+g.DurNs)
		if ge <= 0 || gs >= float64(end-start) || g.DurNs <= 0 {
			continue
		}
		total := int64(0)
		for _, ns := range g.ByCause {
			total += ns
		}
		for b := max(0, int(gs/width)); b < bins && float64(b)*width < ge; b++ {
			lo, hi := math.Max(gs, float64(b)*width), math.Min(ge, float64(b+1)*width)
			if hi <= lo {
				continue
			}
			ov := hi - lo
			idle[b] += ov
			if total > 0 {
				for c, ns := range g.ByCause {
					byCause[b][c] += ov * float64(ns) / float64(total)
				}
			}
		}
	}
	nd := float64(max(1, len(devices)))
	x := make([]float64, bins)
	busy := make([]*float64, bins)
	idleY := make([]*float64, bins)
	c := chartData{ID: fmt.Sprintf("chart-trace-%d", i), XLabel: "milliseconds into the trace", X: x, Bands: []chartBand{},
		Scales: []chartScale{pctScale()}}
	seen := map[tracestats.Cause]bool{}
	var legend []htmlLegend
	for b := range bins {
		x[b] = math.Round(float64(b+1)*width/1e3) / 1e3
		share := math.Min(100, idle[b]/(width*nd)*100)
		busy[b], idleY[b] = ptr(100-share), ptr(share)
	}
	for b := 0; b < bins; {
		best, bestV := tracestats.Cause(0), 0.0
		for ci, v := range byCause[b] {
			if v > bestV {
				best, bestV = tracestats.Cause(ci), v
			}
		}
		if bestV <= 0 {
			b++
			continue
		}
		j := b + 1
		for ; j < bins; j++ {
			nb, nv := tracestats.Cause(0), 0.0
			for ci, v := range byCause[j] {
				if v > nv {
					nb, nv = tracestats.Cause(ci), v
				}
			}
			if nv <= 0 || nb != best {
				break
			}
		}
		c.Bands = append(c.Bands, chartBand{From: math.Round(float64(b)*width/1e3) / 1e3, To: x[j-1], Label: "idle: " + best.String(), Color: causeColor[best]})
		if !seen[best] {
			seen[best] = true
			legend = append(legend, htmlLegend{Label: "idle: " + best.String(), Color: template.CSS(causeColor[best])})
		}
		b = j
	}
	c.Series = []chartSeries{
		{Label: "GPU busy", Unit: "%", Scale: "pct", Color: "#2a7", Width: 2, Fill: "rgba(34,170,119,0.10)", Y: busy},
		{Label: "GPU idle", Unit: "%", Scale: "pct", Color: "#c44", Width: 1, Y: idleY},
	}
	chart := htmlChart{ID: c.ID, Title: "GPU busy and idle: " + label,
		Caption: fmt.Sprintf("%d bins of %s over %d device(s). Shaded: the cause most of each bin's idle time had.", bins, durationNS(width), len(devices)),
		Legend:  legend}
	return c, chart, true
}
