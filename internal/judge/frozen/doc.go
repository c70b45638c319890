// Package frozen judges a job that does not progress and the limits a job is
// heading for, from a timeline (live or recorded) alone: does it progress
// (measured thread by thread: wake-ups out of untimed waits, moves between
// waits, CPU, I/O, completed GPU work), and if not, is it stalled or merely
// idle (waiting for requests or a timer), where does every thread wait,
// which member died and why (matched to the kernel log by pid and named by
// rank), which NCCL / torch.distributed settings turn
// errors into silent hangs, how DataLoader workers were started and whether
// they were forked after CUDA was initialised, copy-on-write growth of
// forked workers and the time until the memory limit, descriptors against
// the soft limit, and the OS-level signature of GIL contention.
//
// Every function is pure: a timeline in, finding.Finding values out, each
// with its evidence (unit, window, source), the change to make and the seed
// section it comes from. Thresholds are the named constants in
// thresholds.go, each with its reason.
package frozen
