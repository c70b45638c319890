package pysample

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// flaky is a target's memory whose reads fail while fail is above zero
// (each pass's first read counting one down), as a running interpreter's
// lists read mid-change do; gone makes every read say the process is gone.
type flaky struct {
	Memory
	fail int
	gone bool
}

// flakyTarget is a built CPython 3.12 image read through a flaky memory.
func flakyTarget(t *testing.T) (*Target, *flaky) {
	t.Helper()
	img, bin := build(t, 12)
	mem := &flaky{Memory: img}
	tg, err := targetOf(t, mem, bin)
	if err != nil {
		t.Fatal(err)
	}
	return tg, mem
}

func (f *flaky) ReadAt(p []byte, addr uint64) error {
	if f.gone {
		return fmt.Errorf("pid 1: %w", procfs.ErrVanished)
	}
	if f.fail > 0 {
		f.fail--
		return fmt.Errorf("%w: %#x (%d bytes)", ErrFault, addr, len(p))
	}
	return f.Memory.ReadAt(p, addr)
}

// A pass that fails is timing as often as layout (about 1 % of passes over
// a busy torchvision loop, on an idle host): one failed first pass left the
// process unsampled for the whole window (a --py-stacks test failed in four
// sessions with "no process of the job was sampled"), and one failed round
// dropped it until the next scan, a second later. Now the first pass is
// tried again, a sampled process is kept through failed passes short of
// maxPassFails in a row, and dropped at once when it is gone.
func TestFailedPassesAreTiming(t *testing.T) {
	tg, mem := flakyTarget(t)

	mem.fail = firstPassTries - 1
	if _, _, err := tg.stacksRetried(); err != nil {
		t.Fatalf("first pass after %d failed tries: %v", firstPassTries-1, err)
	}
	mem.fail = firstPassTries
	if _, _, err := tg.stacksRetried(); err == nil {
		t.Fatalf("first pass: %d failed tries read as a success", firstPassTries)
	}
	mem.fail = 0

	fs := procfs.At(t.TempDir(), t.TempDir())
	p := &sampled{t: tg, threads: map[int]*threadAgg{}, stats: map[int]*procfs.Kept{}, top: profile.PySamples{PID: 1}}
	if !p.round(fs, time.Now()) || p.top.Rounds != 1 {
		t.Fatalf("a readable round: kept %v, %d rounds", p.t != nil, p.top.Rounds)
	}
	for i := 1; i < maxPassFails; i++ {
		mem.fail = 1
		if !p.round(fs, time.Now()) {
			t.Fatalf("dropped after %d failed passes in a row, want kept until %d", i, maxPassFails)
		}
	}
	if !p.round(fs, time.Now()) || p.top.Rounds != 2 || p.fails != 0 {
		t.Fatalf("after the failed passes, a readable one: %d rounds (failed ones are not counted), %d failures in a row", p.top.Rounds, p.fails)
	}
	for i := 1; i <= maxPassFails; i++ {
		mem.fail = 1
		kept := p.round(fs, time.Now())
		if kept != (i < maxPassFails) {
			t.Fatalf("failed pass %d in a row: kept %v", i, kept)
		}
	}
	p.fails = 0
	mem.gone = true
	if p.round(fs, time.Now()) {
		t.Fatal("a process gone is kept")
	}
	if _, _, err := tg.stacksRetried(); !errors.Is(err, procfs.ErrVanished) {
		t.Fatal("a process gone: the first pass is not said to be gone")
	}
}

// The end-of-window dump is tried again as the first pass is: one failed
// pass said "not readable: layout unknown" of an interpreter it reads.
func TestDumpRetriesAFailedPass(t *testing.T) {
	tg, mem := flakyTarget(t)
	mem.fail = firstPassTries - 1
	if p, err := tg.Dump(); err != nil || len(p.Threads) != 1 {
		t.Fatalf("dump after %d failed passes: %v, %+v", firstPassTries-1, err, p)
	}
	mem.fail = firstPassTries
	if _, err := tg.Dump(); err == nil {
		t.Fatalf("dump: %d failed passes read as a success", firstPassTries)
	}
}
