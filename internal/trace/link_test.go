package trace

import (
	"strings"
	"testing"
	"unsafe"
)

// linked builds a trace of runtime calls (name, correlation id) and kernels
// (correlation id), one microsecond apart, and finishes it.
func linked(calls []struct {
	name string
	corr int64
}, kernels []int64) *Trace {
	b := NewBuilder("dup.json", "kineto")
	th := b.Thread(1, 1)
	st := b.Stream(0, 7)
	k := b.Intern("kernel")
	for i, c := range calls {
		b.AddRuntime(RuntimeCall{Start: int64(i) * 1000, End: int64(i)*1000 + 500, Corr: c.corr, Name: b.Intern(c.name), Thread: th, Kind: ClassifyRuntime(c.name)})
	}
	for i, c := range kernels {
		b.AddGPU(GPUOp{Start: 100_000 + int64(i)*1000, End: 100_000 + int64(i)*1000 + 500, Corr: c, Name: k, Stream: st, Kind: Kernel})
	}
	return b.Finish()
}

type call = struct {
	name string
	corr int64
}

// TestNonUniqueCorrelationIDs: links through a correlation id that is not
// unique are guesses; they are not made, and a warning says so.
func TestNonUniqueCorrelationIDs(t *testing.T) {
	// Every event shares one id (a broken exporter).
	tr := linked([]call{{"cudaLaunchKernel", 1}, {"cudaLaunchKernel", 1}, {"cudaLaunchKernel", 1}}, []int64{1, 1, 1})
	for i, g := range tr.GPU {
		if g.Launch >= 0 {
			t.Errorf("all ids shared: kernel %d linked to call %d", i, g.Launch)
		}
	}
	for i, g := range tr.GPU {
		if !g.AmbiguousLaunch {
			t.Errorf("all ids shared: kernel %d not marked as of unknown launch", i)
		}
	}
	if tr.Counts.AmbiguousCorr != 3 || tr.Counts.DuplicateCorr != 2 {
		t.Errorf("counts %+v: want 3 GPU ops with an ambiguous id, 2 duplicate calls", tr.Counts)
	}
	if len(tr.Warnings) != 1 || !strings.Contains(tr.Warnings[0], "dup.json: correlation ids are not unique") || !strings.Contains(tr.Warnings[0], "3 GPU operations") {
		t.Errorf("warnings %q", tr.Warnings)
	}
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}

	// Two kernels on one cudaLaunchKernel: it enqueues one, so which one is unknown.
	tr = linked([]call{{"cudaLaunchKernel", 5}, {"cudaLaunchKernel", 6}}, []int64{5, 5, 6})
	if tr.Counts.AmbiguousCorr != 2 || tr.GPU[2].Launch != 1 || tr.GPU[0].Launch >= 0 || tr.GPU[1].Launch >= 0 {
		t.Errorf("two kernels on one launch: counts %+v, launches %d %d %d", tr.Counts, tr.GPU[0].Launch, tr.GPU[1].Launch, tr.GPU[2].Launch)
	}
	if len(tr.Warnings) != 1 {
		t.Errorf("warnings %q", tr.Warnings)
	}

	// A graph launch enqueues many kernels under its id: that is not a duplicate.
	tr = linked([]call{{"cudaGraphLaunch", 9}}, []int64{9, 9, 9})
	for i, g := range tr.GPU {
		if g.Launch != 0 {
			t.Errorf("graph launch: kernel %d launch %d, want 0", i, g.Launch)
		}
	}
	if tr.Counts.AmbiguousCorr != 0 || len(tr.Warnings) != 0 || tr.Runtime[0].GPU != 0 {
		t.Errorf("graph launch: counts %+v warnings %q gpu %d", tr.Counts, tr.Warnings, tr.Runtime[0].GPU)
	}
}

// TestRecordSizes: the records stay flat and small (docs/TRACE.md).
func TestRecordSizes(t *testing.T) {
	if s := unsafe.Sizeof(GPUOp{}); s != 56 {
		t.Errorf("GPUOp is %d bytes, want 56", s)
	}
	if s := unsafe.Sizeof(RuntimeCall{}); s != 40 {
		t.Errorf("RuntimeCall is %d bytes, want 40", s)
	}
	if s := unsafe.Sizeof(CPUOp{}); s != 32 {
		t.Errorf("CPUOp is %d bytes, want 32", s)
	}
}
