// Package finding is the vocabulary every judgement in gpufeed is expressed in:
// a Finding is one claim with its evidence and the change it calls for, and a
// Verdict names the bottleneck class the findings point to.
//
// Live diagnose, recordings, platform checks and profiler traces all produce
// these same values, so every output renders one model.
package finding

import "fmt"

// Severity orders findings. The zero value is Info.
type Severity int

const (
	// Info is context a reader may want; nothing to change.
	Info Severity = iota
	// Warning costs throughput now or will soon; worth changing.
	Warning
	// Critical stops or halves the job (a dead rank, a downgraded link).
	Critical
)

func (s Severity) String() string {
	switch s {
	case Info:
		return "info"
	case Warning:
		return "warning"
	case Critical:
		return "critical"
	}
	return fmt.Sprintf("severity(%d)", int(s))
}

// MarshalText writes the severity by name, so JSON reads "warning", not 1.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a severity written by MarshalText.
func (s *Severity) UnmarshalText(b []byte) error {
	switch string(b) {
	case "info":
		*s = Info
	case "warning":
		*s = Warning
	case "critical":
		*s = Critical
	default:
		return fmt.Errorf("severity %q: want info, warning or critical", b)
	}
	return nil
}

// Class is a bottleneck class: the answer to "what is the GPU waiting for?".
// Live diagnose and trace analysis share these classes.
type Class string

const (
	SubmissionBound Class = "submission-bound" // CPU launch overhead: GPU idle between many short operations
	SyncBound       Class = "sync-bound"       // the launcher waits on the GPU over and over
	Preprocessing   Class = "preprocessing-bound"
	StorageBound    Class = "storage-bound"
	TransferBound   Class = "transfer-bound"
	TooLittleWork   Class = "too-little-work" // GPU underused, CPU not saturated, nothing waiting
	GPUBound        Class = "gpu-bound"       // the GPU is busy and fed: the healthy outcome
	Stalled         Class = "stalled"         // nothing progresses: members wait on each other, a dead peer, or a GPU that completes nothing
	// Idle: the job waits for requests (accept, an event loop on a listening
	// socket) or a timer, with its GPU idle: nothing is wrong and nothing
	// feeds the GPU because nothing asks for work.
	Idle         Class = "idle"
	Inconclusive Class = "inconclusive"
)

// Classes lists every class in the order documentation presents them.
var Classes = []Class{SubmissionBound, SyncBound, Preprocessing, StorageBound, TransferBound,
	TooLittleWork, GPUBound, Stalled, Idle, Inconclusive}

// Evidence is one measured number (or, where no number fits, one observed
// fact) with what it is, its unit, the window it covers and where it was read.
type Evidence struct {
	// What the number is: "launch thread CPU", "GPU utilisation p50".
	What string `json:"what"`
	// Value and Unit: 97.5 and "%". Unit is empty for a pure count.
	Value float64 `json:"value"`
	Unit  string  `json:"unit,omitempty"`
	// Text replaces Value for a fact that is not a number ("Gen3 x8", "powersave").
	Text string `json:"text,omitempty"`
	// Window: "p50 of 100 samples over 10.0 s", "since boot", "at 14:22:07".
	Window string `json:"window,omitempty"`
	// Source: the file, call or trace the value came from ("/proc/27431/task/27431/schedstat", "NVML nvmlDeviceGetSamples").
	Source string `json:"source,omitempty"`
}

// Finding is one claim a rule, check or analysis makes.
type Finding struct {
	// ID is stable and kebab-case ("launch-thread-descheduled"); docs list every ID.
	ID       string   `json:"id"`
	Severity Severity `json:"severity"`
	// Claim is one line a person reads first.
	Claim    string     `json:"claim"`
	Evidence []Evidence `json:"evidence"`
	// Decision is what to change.
	Decision string `json:"decision,omitempty"`
	// Supports is the class this finding is evidence for, empty when none.
	Supports Class `json:"supports,omitempty"`
	// Subject names what the finding is about ("pid 27431 tid 27431 (pt_main_thread)", "GPU0").
	Subject string `json:"subject,omitempty"`
}

// Verdict is the one answer: the bottleneck class, how sure, and why.
type Verdict struct {
	Class Class `json:"class"`
	// Confidence in [0,1]: the share of the evidence that points to the
	// class. An inconclusive verdict names no class and has confidence 0.
	Confidence float64 `json:"confidence"`
	// Basis says in words what Confidence is made of: which share of the
	// evidence points to the class, and how far the amount of evidence
	// lowered it ("62% of the GPU's idle time ... × 60% for 3.0 s judged").
	Basis string `json:"confidence_basis,omitempty"`
	// Summary is one sentence a person reads first.
	Summary string `json:"summary"`
	// Because lists the IDs of the findings that carry the verdict.
	Because []string `json:"because"`
	// Decision is the change to make first.
	Decision string `json:"decision,omitempty"`
	// Missing says, for an inconclusive verdict, what would make it conclusive.
	Missing string `json:"missing,omitempty"`
}
