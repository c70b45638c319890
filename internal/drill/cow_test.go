package drill

import (
	"context"
	"os/exec"
	"testing"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// Real forked Python workers: those that read a list of objects grow
// their unique memory as their reads copy the pages; those that read one
// flat array do not.
func TestCowListGrowsFlatDoesNot(t *testing.T) {
	livetest.Need(t)
	py := DefaultPython()
	if _, err := exec.LookPath(py); err != nil {
		t.Skipf("no %s", py)
	}
	fs, err := procfs.NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Cow(context.Background(), fs, CowOptions{Items: 200_000, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	tab := rep.Tables[0]
	list, flat := row(t, tab, "list"), row(t, tab, "flat")
	lg := list.Measured[1].Value - list.Measured[0].Value
	fg := flat.Measured[1].Value - flat.Measured[0].Value
	t.Logf("list USS per worker %.1f -> %.1f MiB; flat (%s) %.1f -> %.1f MiB", list.Measured[0].Value/(1<<20), list.Measured[1].Value/(1<<20),
		flat.Label, flat.Measured[0].Value/(1<<20), flat.Measured[1].Value/(1<<20))
	// 200,000 tuples of about 150 bytes: a worker that touched them all
	// copied most of 30 MB.
	if lg < 10<<20 {
		t.Errorf("list storage: USS per worker grew %.1f MiB, want the copied pages of the objects it read (> 10 MiB)", lg/(1<<20))
	}
	if fg > 3<<20 || fg > lg/5 {
		t.Errorf("flat storage: USS per worker grew %.1f MiB, want it flat", fg/(1<<20))
	}
	if len(rep.Tables) != 3 || len(rep.Tables[1].Rows) < 2 {
		t.Errorf("want the summary and a series over time per storage, got %d tables", len(rep.Tables))
	}
}

// The copy drill on the simulator: pinned copies near the simulated
// link's efficiency, pageable ones slower, the link read from the device.
func TestCopyOnTheSimulator(t *testing.T) {
	b := simBackend(t)
	fs, err := procfs.NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Copy(context.Background(), b, fs, CopyOptions{Bytes: 16 << 20, Reps: 3})
	if err != nil {
		t.Fatal(err)
	}
	tab := rep.Tables[0]
	for _, k := range []string{"h2d", "d2h"} {
		p, g := row(t, tab, k+"_pinned"), row(t, tab, k+"_pageable")
		t.Logf("%s: pinned %.1f GB/s (%.0f %% of link), pageable %.1f GB/s", k, p.Measured[0].Value/1e9, p.Measured[1].Value, g.Measured[0].Value/1e9)
		if p.Measured[1] == nil || p.Measured[1].Value < 60 || p.Measured[1].Value > 85 {
			t.Errorf("%s pinned: %v %% of the link, want about 80 %% (the simulated link's efficiency)", k, p.Measured[1])
		}
		if g.Measured[0].Value > 0.8*p.Measured[0].Value {
			t.Errorf("%s: pageable %.1f GB/s is not slower than pinned %.1f GB/s", k, g.Measured[0].Value/1e9, p.Measured[0].Value/1e9)
		}
	}
	t.Log(rep.Notes)
}
