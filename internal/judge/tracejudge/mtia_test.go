package tracejudge

import (
	"path/filepath"
	"testing"

	"github.com/gpufeed/gpufeed/internal/kineto"
	"github.com/gpufeed/gpufeed/internal/trace"
)

// TestMTIAFixture reads a small trace shaped like Kineto's MTIA traces
// (device operations in category mtia_ccp_events on a device "process",
// runtime calls in mtia_runtime, linked by correlation ids and ac2g flows)
// whose idle time per stream is known by construction:
//
//	stream 102: fc [1000,1100] launched at 990; add [1110,1210] launched at
//	1000 (before fc ended: a 10 us gap, kernel_wait); divide [1300,1350]
//	launched at 1250, after add ended (90 us host_wait); an event_wait
//	record [1360,1460] (the stream waiting on stream 1, not work); fc
//	[1500,1600] launched at 1300, long before the stream emptied (150 us
//	other: a device-side wait).
//	stream 1: DMA requests [1000,1005], [1010,1015] (5 us kernel_wait: no
//	launch record), [1100,1105] (85 us other), an event_record marker, and
//	[1200,1220] enqueued by memcpyHtoDAsync at 1150 (95 us host_wait).
//	no stream: one DMA request with no stream argument, device work but on
//	no stream (HTA leaves it out of every stream too).
//
// HTA's own numbers for this file (testdata/hta/mtia_fixture.json, made by
// scripts/hta-reference.py) count the event_wait and event_record records
// as operations; TestAgreesWithHTA checks that emulating that gives HTA's
// numbers exactly.
func TestMTIAFixture(t *testing.T) {
	tr, err := kineto.DecodeFile(filepath.Join(repoRoot, "testdata", "mtia", "mtia_fixture.json"), kineto.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Warnings) > 0 {
		t.Errorf("warnings: %q", tr.Warnings)
	}
	var work, syncs int
	for _, g := range tr.GPU {
		if g.Kind.IsWork() {
			work++
		} else {
			syncs++
		}
	}
	if work != 9 || syncs != 2 {
		t.Fatalf("read %d device operations and %d device-side wait records, want 9 and 2", work, syncs)
	}
	kinds := map[string]trace.RuntimeKind{}
	for _, r := range tr.Runtime {
		kinds[tr.Name(r.Name)] = r.Kind
	}
	for name, want := range map[string]trace.RuntimeKind{
		"runFunction - job_prep_and_submit_for_execution": trace.Launch,
		"enqueueCommand memcpyHtoDAsync":                  trace.MemcpyAsync,
		"enqueueCommand waitOnEvent":                      trace.StreamWaitEvent,
		"synchronizeStream":                               trace.StreamSync,
	} {
		if kinds[name] != want {
			t.Errorf("runtime call %q is %s, want %s", name, kinds[name], want)
		}
	}
	var copies int
	for _, g := range tr.GPU {
		if tr.Name(g.Name) == "dma_request" {
			copies++
			if g.Kind != trace.Memcpy || g.Copy == trace.CopyUnknown || g.Bytes == 0 {
				t.Errorf("dma_request at %d ns read as %s %s, %d bytes; want a copy with its direction and size", g.Start, g.Kind, g.Copy, g.Bytes)
			}
		}
	}
	if copies != 5 {
		t.Errorf("%d DMA requests, want 5", copies)
	}

	r := Analyze(tr, Options{})
	if r.Scope.GPUOps != 9 {
		t.Errorf("%d device operations in scope, want 9", r.Scope.GPUOps)
	}
	if r.Launch.Launches != 5 {
		t.Errorf("%d launches counted, want 5 (4 runFunction, 1 memcpyHtoDAsync)", r.Launch.Launches)
	}
	want := map[int64][3]int64{
		1:   {95_000, 5_000, 85_000},
		102: {90_000, 10_000, 150_000},
	}
	if len(r.Idle) != len(want) {
		t.Errorf("idle breakdown over %d streams, want %d: %+v", len(r.Idle), len(want), r.Idle)
	}
	for _, s := range r.Idle {
		w, ok := want[s.Stream]
		if !ok {
			t.Errorf("unexpected stream %d in the idle breakdown", s.Stream)
			continue
		}
		if got := [3]int64{s.HostWait, s.KernelWait, s.Other}; got != w {
			t.Errorf("stream %d: host_wait/kernel_wait/other = %v ns, want %v", s.Stream, got, w)
		}
	}
	if r.Rules.StreamSyncs.Count != 1 {
		t.Errorf("%d stream synchronisations, want 1 (synchronizeStream)", r.Rules.StreamSyncs.Count)
	}
}
