// Package diagnose is the observation pipeline of gpufeed diagnose and
// gpufeed demo: it describes the target (a running process, a zombie, a
// kernel thread it refuses) or launches the command, samples the job over
// its window (internal/sample), reads once at the end of the window what
// the samples do not hold (device channels, the platform checks, process
// facts, the kernel log, Python stacks: EndOfWindow), and judges the
// timeline into the report (Judge: internal/derive, internal/judge,
// internal/render). cmd/gpufeed keeps the flags and the wiring; tests drive
// Run, Observe and Judge directly.
//
// Nothing here prints: warnings and progress go to the callbacks the caller
// gives.
package diagnose
