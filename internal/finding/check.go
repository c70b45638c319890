package finding

// CheckStatus is what a platform check concluded about one subject.
type CheckStatus string

const (
	// CheckOK: the fact was read and is as it should be.
	CheckOK CheckStatus = "ok"
	// CheckWarn: costs throughput now or may; worth changing.
	CheckWarn CheckStatus = "warn"
	// CheckFail: starves the GPU or breaks the job; gpufeed check exits 1.
	CheckFail CheckStatus = "fail"
	// CheckAbsent: the fact does not exist here (no cpufreq in a VM, no GPU,
	// no target given); nothing is wrong.
	CheckAbsent CheckStatus = "absent"
	// CheckNotVisible: the fact exists but this user may not read it; Need
	// says what would show it.
	CheckNotVisible CheckStatus = "not-visible"
	// CheckError: the source was there but did not parse; the outcome says
	// where.
	CheckError CheckStatus = "error"
)

// CheckOutcome is one platform check's conclusion about one subject (a
// check yields one per GPU, per pressure resource, per mount...). The
// checks (internal/check) produce them, the renderers print them and
// diagnose folds the failed and warned ones into its findings: they live
// here, in the shared vocabulary, so that none of those imports another.
type CheckOutcome struct {
	ID       string      `json:"id"`
	Status   CheckStatus `json:"status"`
	Severity Severity    `json:"severity"`
	// Subject is what the outcome is about ("GPU 0000:81:00.0", "pid 4242", "/dev/shm").
	Subject string `json:"subject,omitempty"`
	// Claim is the one line a person reads first.
	Claim    string     `json:"claim"`
	Evidence []Evidence `json:"evidence,omitempty"`
	// Decision is what to change (or, for ok, nothing).
	Decision string `json:"decision,omitempty"`
	// Need says, for absent, not-visible and error outcomes, what would let
	// the check see.
	Need     string `json:"need,omitempty"`
	Supports Class  `json:"supports,omitempty"`
}

// Finding converts the outcome to a finding.
func (o CheckOutcome) Finding() Finding {
	return Finding{
		ID: o.ID, Severity: o.Severity, Claim: o.Claim, Evidence: o.Evidence,
		Decision: o.Decision, Supports: o.Supports, Subject: o.Subject,
	}
}
