package thresholds

import (
	"strconv"
	"time"
)

// Text returns the thresholds the explanations of findings quote (`gpufeed
// explain`), by name, as a person reads them ("5 %", "30 us", "2 s"). An
// explanation writes {Name} where it quotes one, so the text says the
// value the judges use and cannot drift from it.
func Text() map[string]string {
	return map[string]string{
		"ModerateSharePct":           pct(ModerateSharePct),
		"HighSharePct":               pct(HighSharePct),
		"GPUBoundIdleMaxPct":         pct(GPUBoundIdleMaxPct),
		"DominantCausePct":           pct(DominantCausePct),
		"CPUBottleneckGPUUtilPct":    pct(CPUBottleneckGPUUtilPct),
		"CPUBottleneckCPUUtilPct":    pct(CPUBottleneckCPUUtilPct),
		"CPUBottleneckDatapointsPct": pct(CPUBottleneckDatapointsPct),
		"LaunchSaturatedPct":         pct(LaunchSaturatedPct),
		"LaunchWaitPct":              pct(LaunchWaitPct),
		"QuotaThrottledPct":          pct(QuotaThrottledPct),
		"QuotaMinPeriods":            strconv.Itoa(QuotaMinPeriods),
		"MemCgroupMinRate":           "1 MiB/s",
		"MemCgroupMinReadings":       strconv.Itoa(MemCgroupMinReadings),
		"MemCgroupHorizon":           dur(MemCgroupHorizon),
		"ProducerBusyPct":            pct(ProducerBusyPct),
		"ProducerIOWaitPct":          pct(ProducerIOWaitPct),
		"PCIeAchievableShare":        pct(100 * PCIeAchievableShare),
		"LinkSaturatedPct":           pct(LinkSaturatedPct),
		"ConfidenceZ":                strconv.FormatFloat(ConfidenceZ, 'f', -1, 64),
		"ConfidenceMaxIntervals":     strconv.Itoa(ConfidenceMaxIntervals),
		"IndistinctMaxConfidence":    pct(IndistinctMaxConfidence * 100),
		"PeggedCorePct":              pct(PeggedCorePct),
		"IdleCoresPct":               pct(IdleCoresPct),
		"PeggedJobSharePct":          pct(PeggedJobSharePct),
		"OversubscribedTicksPct":     pct(OversubscribedTicksPct),
		"ClockDropPct":               pct(ClockDropPct),
		"ClockThrottledPct":          pct(ClockThrottledPct),
		"LaunchRuntimeOutlier":       dur(LaunchRuntimeOutlier),
		"LaunchDelayOutlier":         dur(LaunchDelayOutlier),
		"ConsecutiveKernelDelay":     dur(ConsecutiveKernelDelay),
		"SyncsPerStepMax":            strconv.Itoa(SyncsPerStepMax),
		"TooLittleWorkKernelTimePct": pct(TooLittleWorkKernelTimePct),
		"NsightGapThreshold":         dur(time.Duration(NsightGapThresholdNs)),
		"NsightLowUsePct":            pct(NsightLowUsePct),
		"NsightLowUseChunks":         strconv.Itoa(NsightLowUseChunks),
		"CopiesDominatePct":          pct(CopiesDominatePct),
		"StragglerLagPct":            pct(StragglerLagPct),
		"RankBusyPct":                pct(RankBusyPct),
		"RankWaitPct":                pct(RankWaitPct),
		"StragglerPeerGap":           num(StragglerPeerGap) + " points",
		"LaunchQueueFullShare":       pct(100 * LaunchQueueFullShare),
		"ShortKernelsShare":          pct(100 * ShortKernelsShare),
		"StallMinWindow":             dur(StallMinWindow),
		"StartUpInView":              dur(StartUpInView),
		"IdleAfterStartUpMinSpan":    dur(IdleAfterStartUpMinSpan),
		"GPUWorkMinUtil":             pct(GPUWorkMinUtil),
		"StartUpWarmUpMaxSpan":       dur(StartUpWarmUpMaxSpan),
		"StallMinSamples":            strconv.Itoa(StallMinSamples),
		"StallMinWakeups":            strconv.Itoa(StallMinWakeups),
		"StallMaxCPUCores":           pct(100 * StallMaxCPUCores),
		"ForkMinCount":               strconv.Itoa(ForkMinCount),
		"ForkMinPerSec":              strconv.FormatFloat(ForkMinPerSec, 'f', -1, 64) + "/s",
		"TimerPollMaxCPUPerWake":     dur(TimerPollMaxCPUPerWake),
		"StallMaxIOBytesPerSec":      strconv.Itoa(StallMaxIOBytesPerSec>>10) + " KiB/s",
		"StallMaxGPUUtil":            pct(StallMaxGPUUtil),
		"StallSpinGPUUtil":           pct(StallSpinGPUUtil),
		"DStateWarn":                 dur(DStateWarn),
		"MaxBlockedRows":             strconv.Itoa(MaxBlockedRows),
		"COWMinRate":                 strconv.Itoa(COWMinRate>>10) + " KiB/s",
		"COWMinGrowth":               strconv.Itoa(COWMinGrowth>>20) + " MiB",
		"COWMinCopyShare":            pct(100 * COWMinCopyShare),
		"COWForkBaseline":            strconv.Itoa(COWForkBaseline>>20) + " MiB",
		"COWSettle":                  dur(COWSettle),
		"COWWarnHorizon":             dur(COWWarnHorizon),
		"COWInheritedBaseline":       strconv.Itoa(COWInheritedBaseline>>20) + " MiB",
		"COWMinCopied":               strconv.Itoa(COWMinCopied>>20) + " MiB",
		"COWMinCopiedShare":          pct(100 * COWMinCopiedShare),
		"COWWarnShare":               pct(100 * COWWarnShare),
		"COWMinCopiedRate":           strconv.Itoa(COWMinCopiedRate>>10) + " KiB/s",
		"FDMinRate":                  num(FDMinRate),
		"FDMinGrowth":                strconv.Itoa(FDMinGrowth),
		"FDHorizon":                  dur(FDHorizon),
		"FDNearFraction":             pct(100 * FDNearFraction),
		"FDCriticalFraction":         pct(100 * FDCriticalFraction),
		"FDCriticalHorizon":          dur(FDCriticalHorizon),
		"GILBusyCores":               pct(100 * GILBusyCores),
		"GILMaxRunCores":             num(GILMaxRunCores),
		"GILMaxDemandPerThread":      num(GILMaxDemandPerThread),
		"GILHolderRoundsPct":         pct(GILHolderRoundsPct),
		"GILHolderSharePct":          pct(GILHolderSharePct),
		"PythonStageSharePct":        pct(PythonStageSharePct),
	}
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func pct(v float64) string { return num(v) + " %" }

// dur writes a duration in the unit that reads best: 30 us, 500 ms, 2 s,
// 5 minutes, an hour, 24 hours.
func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return num(float64(d)/1e3) + " us"
	case d < time.Second:
		return num(float64(d)/1e6) + " ms"
	case d < time.Minute:
		return num(d.Seconds()) + " s"
	case d < time.Hour:
		return num(d.Minutes()) + " minutes"
	case d == time.Hour:
		return "an hour"
	}
	return num(d.Hours()) + " hours"
}
