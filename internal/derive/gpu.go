package derive

import (
	"math"

	"github.com/gpufeed/gpufeed/internal/gpu"
)

// GPU is one device's derived series. A sample taken at tick i+1 covers
// the window since the previous sample, so it fills interval i: the same
// interval as the threads' CPU over that span.
type GPU struct {
	Index int
	Info  *gpu.DeviceInfo

	UtilPct     Series // percent of the interval with a kernel running (NVML's definition)
	MemUtilPct  Series
	SMClockMHz  Series
	MemClockMHz Series
	PowerW      Series
	TempC       Series
	PCIeTxBps   Series
	PCIeRxBps   Series

	Util Stats // of UtilPct: p10/p50/p90 show burstiness across intervals
	// Points are the device's finest-resolution utilisation readings, and their stats.
	Points     []gpu.UtilPoint
	PointStats Stats

	// ClockEventReasons ORs the throttle reasons seen over the window;
	// ClockEventsRead says the driver gave them at least once (a zero mask
	// then means no reason, not unknown).
	ClockEventReasons uint64
	ClockEventsRead   bool
	// Lost is the message from when the device stopped answering, and the tick index.
	Lost   string
	LostAt int
	// Unsupported names readings the device said it does not support.
	Unsupported []string
}

func (a *View) buildGPUs() {
	tl := a.Timeline
	n := len(a.Intervals)
	byIndex := map[int]*GPU{}
	get := func(idx int) *GPU {
		if g, ok := byIndex[idx]; ok {
			return g
		}
		g := &GPU{Index: idx, LostAt: -1, UtilPct: nanSeries(n), MemUtilPct: nanSeries(n), SMClockMHz: nanSeries(n),
			MemClockMHz: nanSeries(n), PowerW: nanSeries(n), TempC: nanSeries(n), PCIeTxBps: nanSeries(n), PCIeRxBps: nanSeries(n)}
		for i := range tl.Devices {
			if tl.Devices[i].Index == idx {
				g.Info = &tl.Devices[i]
			}
		}
		byIndex[idx] = g
		a.GPUs = append(a.GPUs, g)
		return g
	}
	for i := range tl.Devices {
		get(tl.Devices[i].Index)
	}
	unsup := map[int]map[string]bool{}
	for ti, tk := range tl.Ticks {
		for _, s := range tk.GPUs {
			g := get(s.Index)
			if s.Lost != "" && g.Lost == "" {
				g.Lost, g.LostAt = s.Lost, ti
			}
			for _, u := range s.Unsupported {
				if unsup[s.Index] == nil {
					unsup[s.Index] = map[string]bool{}
				}
				if !unsup[s.Index][u] {
					unsup[s.Index][u] = true
					g.Unsupported = append(g.Unsupported, u)
				}
			}
			g.Points = append(g.Points, s.Points...)
			if s.ClockEventReasons != nil {
				g.ClockEventReasons |= *s.ClockEventReasons
				g.ClockEventsRead = true
			}
			i := ti - 1 // the sample covers the interval ending at this tick
			if i < 0 || i >= n {
				continue
			}
			setF(g.UtilPct, i, s.UtilPercent)
			setF(g.MemUtilPct, i, s.MemUtilPercent)
			setU32(g.SMClockMHz, i, s.SMClockMHz)
			setU32(g.MemClockMHz, i, s.MemClockMHz)
			setF(g.PowerW, i, s.PowerW)
			setF(g.TempC, i, s.TempC)
			setF(g.PCIeTxBps, i, s.PCIeTxBytesPerSec)
			setF(g.PCIeRxBps, i, s.PCIeRxBytesPerSec)
		}
	}
	for _, g := range a.GPUs {
		g.Util = g.UtilPct.Stats()
		pts := make([]float64, len(g.Points))
		for i, p := range g.Points {
			pts[i] = p.Percent
		}
		g.PointStats = statsOf(pts)
	}
}

func setF(s Series, i int, v *float64) {
	if v != nil && !math.IsNaN(*v) {
		s[i] = *v
	}
}

func setU32(s Series, i int, v *uint32) {
	if v != nil {
		s[i] = float64(*v)
	}
}
