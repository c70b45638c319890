package render

import (
	"github.com/gpufeed/gpufeed/internal/derive/tracestats"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
)

// The trace report as JSON writes it: the judges' numbers, in the
// contract's units (nanoseconds where they keep microseconds, percent where
// they keep shares of one), snake_case everywhere, null where a value does
// not apply.

type traceDoc struct {
	Header
	Reports []traceRank    `json:"reports"`
	Multi   *traceMulti    `json:"multi_rank"`
	Skipped []TraceSkipped `json:"skipped"`
}

type traceRank struct {
	Source        string                   `json:"source"`
	Format        string                   `json:"format"`
	Rank          *int                     `json:"rank"`
	Scope         traceScope               `json:"scope"`
	Temporal      tracestats.Temporal      `json:"temporal_breakdown"`
	Idle          []tracestats.StreamIdle  `json:"idle_time_breakdown"`
	Launch        traceLaunch              `json:"kernel_launch_stats"`
	QueueLength   []tracestats.QueueLength `json:"queue_length"`
	Rules         traceRules               `json:"rules"`
	Attribution   traceAttribution         `json:"attribution"`
	SetupLaunches traceSetup               `json:"setup_launches"`
	Confidence    traceConfidenceJSON      `json:"confidence"`
	Shares        traceShares              `json:"shares"`
	Steps         []tracestats.StepSummary `json:"steps"`
	Verdict       *jsonVerdict             `json:"verdict"`
	Findings      []jsonFinding            `json:"findings"`
	Warnings      []string                 `json:"warnings"`
	Counts        traceCounts              `json:"counts"`
}

// nsDist is a distribution of durations in nanoseconds.
type nsDist struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean_ns"`
	Std   float64 `json:"std_ns"`
	Min   float64 `json:"min_ns"`
	P25   float64 `json:"p25_ns"`
	P50   float64 `json:"p50_ns"`
	P75   float64 `json:"p75_ns"`
	P95   float64 `json:"p95_ns"`
	Max   float64 `json:"max_ns"`
}

func usDist(d tracestats.Dist) nsDist {
	return nsDist{Count: d.Count, Mean: d.Mean * 1e3, Std: d.Std * 1e3, Min: d.Min * 1e3, P25: d.P25 * 1e3,
		P50: d.P50 * 1e3, P75: d.P75 * 1e3, P95: d.P95 * 1e3, Max: d.Max * 1e3}
}

type traceLaunch struct {
	Launches         int    `json:"launches"`
	Runtime          nsDist `json:"runtime"`
	Delay            nsDist `json:"launch_delay"`
	RuntimeOutliers  int    `json:"runtime_outliers"`
	DelayOutliers    int    `json:"launch_delay_outliers"`
	ShortKernels     int    `json:"short_kernels"`
	ShortKernelGPUNs int64  `json:"short_kernel_gpu_ns"`
	GPU              nsDist `json:"gpu"`
}

// callTotals is a set of calls. Bytes is null for calls that move no
// bytes, and for copies whose trace records no byte counts.
type callTotals struct {
	Count  int64  `json:"count"`
	HostNs int64  `json:"host_ns"`
	MaxNs  int64  `json:"max_ns"`
	Bytes  *int64 `json:"bytes"`
}

func calls(c tracestats.CallTotals) callTotals {
	out := callTotals{Count: c.Count, HostNs: c.HostNs, MaxNs: c.MaxNs}
	if c.Bytes > 0 {
		b := c.Bytes
		out.Bytes = &b
	}
	return out
}

// traceScope is the analysed part of a rank's trace; its bounds are null
// when no GPU operation was analysed (there is no span to bound), never
// the -1 the scope is built with.
type traceScope struct {
	StartNs      *int64 `json:"start_ns"`
	EndNs        *int64 `json:"end_ns"`
	Steps        int    `json:"steps"`
	DroppedSteps int    `json:"dropped_steps"`
	GPUOps       int    `json:"gpu_ops"`
	Note         string `json:"note,omitempty"`
}

func scope(s tracestats.ScopeInfo) traceScope {
	out := traceScope{Steps: s.Steps, DroppedSteps: s.DroppedSteps, GPUOps: s.GPUOps, Note: s.Note}
	if s.GPUOps > 0 && s.StartNs >= 0 && s.EndNs >= s.StartNs {
		start, end := s.StartNs, s.EndNs
		out.StartNs, out.EndNs = &start, &end
	}
	return out
}

type lowUse struct {
	Device     int32   `json:"device"`
	StartNs    int64   `json:"start_ns"`
	DurNs      int64   `json:"dur_ns"`
	UsePercent float64 `json:"use_percent"`
}

type traceRules struct {
	PageableCopies callTotals       `json:"pageable_async_copies"`
	SyncCopies     callTotals       `json:"sync_copies"`
	SyncMemsets    callTotals       `json:"sync_memsets"`
	StreamSyncs    callTotals       `json:"stream_syncs"`
	DeviceSyncs    callTotals       `json:"device_syncs"`
	EventSyncs     callTotals       `json:"event_syncs"`
	GapThresholdNs int64            `json:"gap_threshold_ns"`
	Gaps           []tracestats.Gap `json:"gaps"`
	LowUsePercent  float64          `json:"low_use_percent"`
	LowUse         []lowUse         `json:"low_use_windows"`
	FromSQL        bool             `json:"from_sql"`
}

type traceSetup struct {
	Calls        []tracestats.SetupCall `json:"calls"`
	TotalNs      int64                  `json:"total_ns"`
	MedianLaunch float64                `json:"median_launch_ns"`
	MADLaunch    float64                `json:"mad_launch_ns"`
	ThresholdNs  float64                `json:"threshold_ns"`
	Launches     int                    `json:"launches"`
}

type traceConfidenceJSON struct {
	Percent         float64  `json:"percent"`
	StrengthPercent float64  `json:"strength_percent"`
	EvidencePercent float64  `json:"evidence_percent"`
	EffectiveGaps   *float64 `json:"effective_gaps"`
	Gaps            int      `json:"gaps"`
	EffectiveSteps  *float64 `json:"effective_steps"`
	Steps           int      `json:"steps"`
	SpanNs          int64    `json:"span_ns"`
	Text            string   `json:"text"`
}

// effective is nil for tracejudge's "-1: does not apply".
func effective(v float64) *float64 {
	if v < 0 {
		return nil
	}
	return &v
}

type traceShares struct {
	Idle         float64 `json:"idle_percent"`
	Input        float64 `json:"input_percent"`
	Sync         float64 `json:"sync_percent"`
	Transfer     float64 `json:"transfer_percent"`
	Submission   float64 `json:"submission_percent"`
	OtherAPI     float64 `json:"other_api_percent"`
	Setup        float64 `json:"setup_percent"`
	Untraced     float64 `json:"untraced_percent"`
	GPUWait      float64 `json:"gpu_wait_percent"`
	Unattributed float64 `json:"unattributed_percent"`
	CopyBusy     float64 `json:"copy_busy_percent"`
	// SmallKernel is null when the trace does not say how many blocks
	// each kernel ran (Kineto's "blocks per SM").
	SmallKernel *float64 `json:"small_kernel_percent"`
}

func shares(s tracejudge.Shares) traceShares {
	return traceShares{Idle: s.IdlePct, Input: s.Input, Sync: s.Sync, Transfer: s.Transfer, Submission: s.Submission,
		OtherAPI: s.OtherAPI, Setup: s.Setup, Untraced: s.Untraced, GPUWait: s.GPUWait, Unattributed: s.Unattributed,
		CopyBusy: s.CopyBusyPct, SmallKernel: effective(s.SmallKernelPct)}
}

// traceAttribution is tracestats.Attribution with a gap's step null when
// the gap began in no ProfilerStep.
type traceAttribution struct {
	SpanNs        int64                   `json:"span_ns"`
	IdleNs        int64                   `json:"idle_ns"`
	Gaps          int                     `json:"gaps"`
	ByCause       tracestats.ByCause      `json:"by_cause_ns"`
	AfterSyncNs   int64                   `json:"after_sync_ns"`
	AfterSyncGaps int                     `json:"after_sync_gaps"`
	AfterSync     tracestats.ByCause      `json:"after_sync_by_cause_ns"`
	DuringGPUWait tracestats.ByCause      `json:"during_gpu_wait_ns"`
	TopOps        []tracestats.NamedTime  `json:"top_cpu_ranges"`
	TopAPIs       []tracestats.NamedTime  `json:"top_api_calls"`
	Threads       []tracestats.ThreadTime `json:"threads"`
	Longest       []traceGap              `json:"longest_gaps"`
}

type traceGap struct {
	Device    int32              `json:"device"`
	StartNs   int64              `json:"start_ns"`
	DurNs     int64              `json:"dur_ns"`
	ByCause   tracestats.ByCause `json:"by_cause_ns"`
	Next      string             `json:"next_op"`
	AfterSync bool               `json:"after_sync"`
	Step      *int               `json:"step"`
}

func attribution(a tracestats.Attribution) traceAttribution {
	out := traceAttribution{SpanNs: a.SpanNs, IdleNs: a.IdleNs, Gaps: a.Gaps, ByCause: a.ByCause, AfterSyncNs: a.AfterSyncNs,
		AfterSyncGaps: a.AfterSyncGaps, AfterSync: a.AfterSync, DuringGPUWait: a.DuringGPUWait,
		TopOps: nonNil(a.TopOps), TopAPIs: nonNil(a.TopAPIs), Threads: nonNil(a.Threads), Longest: []traceGap{}}
	for _, g := range a.Longest {
		tg := traceGap{Device: g.Device, StartNs: g.StartNs, DurNs: g.DurNs, ByCause: g.ByCause, Next: g.Next, AfterSync: g.AfterSync}
		if g.Step >= 0 {
			step := g.Step
			tg.Step = &step
		}
		out.Longest = append(out.Longest, tg)
	}
	return out
}

// traceCounts tallies the events read by fate; every count is present.
type traceCounts struct {
	Events        int64 `json:"events"`
	GPUOps        int64 `json:"gpu_ops"`
	RuntimeCalls  int64 `json:"runtime_calls"`
	CPUOps        int64 `json:"cpu_ops"`
	Flows         int64 `json:"flows"`
	Metadata      int64 `json:"metadata"`
	Instants      int64 `json:"instants"`
	Ignored       int64 `json:"ignored"`
	BadTime       int64 `json:"bad_time"`
	Unlinked      int64 `json:"unlinked"`
	DuplicateCorr int64 `json:"duplicate_correlation"`
	AmbiguousCorr int64 `json:"ambiguous_correlation"`
	NoPhase       int64 `json:"no_phase"`
	BadRows       int64 `json:"bad_rows"`
	DecodedBytes  int64 `json:"decoded_bytes"`
}

type traceRankSummary struct {
	Rank         int          `json:"rank"`
	Source       string       `json:"source"`
	Verdict      *jsonVerdict `json:"verdict"`
	Shares       traceShares  `json:"shares"`
	StepMedianNs int64        `json:"step_median_ns"`
}

type traceMulti struct {
	Ranks      []traceRankSummary     `json:"ranks"`
	Stragglers []tracejudge.Straggler `json:"stragglers"`
	Findings   []jsonFinding          `json:"findings"`
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func traceJSON(res *TraceReport) traceDoc {
	d := traceDoc{Header: header(res.Header), Reports: []traceRank{}, Skipped: nonNil(res.Skipped)}
	for _, r := range res.Reports {
		v := r.Verdict
		c := r.Counts
		ru := r.Rules
		tr := traceRank{
			Source: r.Source, Format: r.Format, Scope: scope(r.Scope), Temporal: r.Temporal, Idle: nonNil(r.Idle),
			Launch: traceLaunch{Launches: r.Launch.Launches, Runtime: usDist(r.Launch.RuntimeUs), Delay: usDist(r.Launch.DelayUs),
				RuntimeOutliers: r.Launch.RuntimeOutliers, DelayOutliers: r.Launch.DelayOutliers, ShortKernels: r.Launch.ShortKernels,
				ShortKernelGPUNs: r.Launch.ShortKernelGPUNs, GPU: usDist(r.Launch.GPUUs)},
			QueueLength: nonNil(r.QueueLength),
			Rules: traceRules{PageableCopies: calls(ru.PageableCopies), SyncCopies: calls(ru.SyncCopies), SyncMemsets: calls(ru.SyncMemsets),
				StreamSyncs: calls(ru.StreamSyncs), DeviceSyncs: calls(ru.DeviceSyncs), EventSyncs: calls(ru.EventSyncs),
				GapThresholdNs: ru.GapThresholdNs, Gaps: nonNil(ru.Gaps), LowUsePercent: ru.LowUsePct, LowUse: []lowUse{}, FromSQL: ru.FromSQL},
			Attribution: attribution(r.Attribution),
			SetupLaunches: traceSetup{Calls: nonNil(r.SetupLaunches.Calls), TotalNs: r.SetupLaunches.TotalNs,
				MedianLaunch: r.SetupLaunches.MedianUs * 1e3, MADLaunch: r.SetupLaunches.MADUs * 1e3,
				ThresholdNs: r.SetupLaunches.ThresholdUs * 1e3, Launches: r.SetupLaunches.Launches},
			Confidence: traceConfidenceJSON{Percent: r.Confidence.Value * 100, StrengthPercent: r.Confidence.Strength * 100,
				EvidencePercent: r.Confidence.Evidence * 100, EffectiveGaps: effective(r.Confidence.Gaps), Gaps: r.Confidence.GapsTotal,
				EffectiveSteps: effective(r.Confidence.Steps), Steps: r.Confidence.StepsTotal, SpanNs: r.Confidence.SpanNs, Text: r.Confidence.Text},
			Shares:   shares(r.Shares),
			Steps:    nonNil(r.Steps),
			Verdict:  verdictJSON(&v),
			Findings: findingsJSON(r.Findings),
			Warnings: nonNil(r.Warnings),
			Counts: traceCounts{Events: c.Events, GPUOps: c.GPUOps, RuntimeCalls: c.RuntimeCalls, CPUOps: c.CPUOps, Flows: c.Flows,
				Metadata: c.Metadata, Instants: c.Instants, Ignored: c.Ignored, BadTime: c.BadTime, Unlinked: c.Unlinked,
				DuplicateCorr: c.DuplicateCorr, AmbiguousCorr: c.AmbiguousCorr, NoPhase: c.NoPhase, BadRows: c.BadRows, DecodedBytes: c.Bytes},
		}
		if r.Rank >= 0 {
			rank := r.Rank
			tr.Rank = &rank
		}
		for _, w := range ru.LowUse {
			tr.Rules.LowUse = append(tr.Rules.LowUse, lowUse{Device: w.Device, StartNs: w.StartNs, DurNs: w.DurNs, UsePercent: w.UsePct})
		}
		d.Reports = append(d.Reports, tr)
	}
	if m := res.Multi; m != nil {
		tm := &traceMulti{Ranks: []traceRankSummary{}, Stragglers: nonNil(m.Stragglers), Findings: findingsJSON(m.Findings)}
		for _, r := range m.Ranks {
			v := r.Verdict
			tm.Ranks = append(tm.Ranks, traceRankSummary{Rank: r.Rank, Source: r.Source, Verdict: verdictJSON(&v), Shares: shares(r.Shares), StepMedianNs: r.StepMedianNs})
		}
		d.Multi = tm
	}
	return d
}
