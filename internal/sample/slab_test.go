package sample

import (
	"testing"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The slab's slices are each a tick's own: filled to their capacity, none
// writes into another's samples; one larger than a chunk gets its own; an
// append past the capacity moves the slice, never into the next.
func TestSampleSlabSlicesAreSeparate(t *testing.T) {
	var a sampleSlab
	sizes := []int{1000, 1000, slabSamples / 2, slabSamples + 7, 3, 0, 1}
	var got [][]timeline.ThreadSample
	for i, n := range sizes {
		s := a.take(n)
		if len(s) != 0 || cap(s) != n {
			t.Fatalf("take(%d): len %d cap %d", n, len(s), cap(s))
		}
		for k := range n {
			s = append(s, timeline.ThreadSample{TID: i*1_000_000 + k})
		}
		got = append(got, s)
	}
	for i, s := range got {
		for k := range s {
			if s[k].TID != i*1_000_000+k {
				t.Fatalf("slice %d sample %d: tid %d, overwritten", i, k, s[k].TID)
			}
		}
	}
	first := got[0]
	moved := append(first, timeline.ThreadSample{TID: -1})
	if &moved[0] == &first[0] {
		t.Fatal("an append past the capacity stayed in the chunk")
	}
	if got[1][0].TID != 1_000_000 {
		t.Fatalf("an append past the capacity wrote into the next slice: tid %d", got[1][0].TID)
	}
}
