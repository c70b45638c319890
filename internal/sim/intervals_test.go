package sim

import (
	"math/rand/v2"
	"testing"
)

func TestSpanSetMerges(t *testing.T) {
	var u spanSet
	u.add(10, 20)
	u.add(30, 40)
	u.add(20, 25) // touches the first: merged
	u.add(50, 60)
	u.add(5, 8)   // before everything
	u.add(35, 55) // bridges the 30-40 and 50-60 spans
	want := []span{{5, 8}, {10, 25}, {30, 60}}
	if len(u.s) != len(want) {
		t.Fatalf("spans %v, want %v", u.s, want)
	}
	for i := range want {
		if u.s[i] != want[i] {
			t.Fatalf("spans %v, want %v", u.s, want)
		}
	}
	if got := u.busy(0, 100); got != 3+15+30 {
		t.Errorf("busy(0,100) = %d, want 48", got)
	}
	if got := u.busy(22, 33); got != 3+3 {
		t.Errorf("busy(22,33) = %d, want 6", got)
	}
	if !u.covers(30) || u.covers(25) || u.covers(9) {
		t.Errorf("covers: 30 %v (want true), 25 %v, 9 %v (want false)", u.covers(30), u.covers(25), u.covers(9))
	}
	u.pruneBefore(25)
	if len(u.s) != 1 || u.s[0] != (span{30, 60}) {
		t.Errorf("after pruneBefore(25): %v, want [{30 60}]", u.s)
	}
}

// TestSpanSetMatchesBitmap checks the union arithmetic against a brute-force
// bitmap over random spans, inserted in random order.
func TestSpanSetMatchesBitmap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		const size = 500
		var bits [size]bool
		var u spanSet
		for range 1 + r.IntN(40) {
			a := r.Int64N(size)
			b := a + r.Int64N(60)
			b = min(b, size)
			u.add(a, b)
			for x := a; x < b; x++ {
				bits[x] = true
			}
		}
		for k := 1; k < len(u.s); k++ {
			if u.s[k].start <= u.s[k-1].end {
				t.Fatalf("round %d: spans overlap or touch: %v", round, u.s)
			}
		}
		for range 20 {
			a := r.Int64N(size)
			b := a + r.Int64N(size-a+1)
			var want int64
			for x := a; x < b; x++ {
				if bits[x] {
					want++
				}
			}
			if got := u.busy(a, b); got != want {
				t.Fatalf("round %d: busy(%d,%d) = %d, want %d; spans %v", round, a, b, got, want, u.s)
			}
		}
	}
}

func TestTransferLogProratesBytes(t *testing.T) {
	var l transferLog
	l.add(0, 100, 1000)
	l.add(200, 300, 500)
	if got := l.bytesIn(50, 250); got != 500+250 {
		t.Errorf("bytesIn(50,250) = %g, want 750", got)
	}
	l.pruneBefore(150)
	if got := l.bytesIn(0, 1000); got != 500 {
		t.Errorf("after prune: bytesIn = %g, want 500", got)
	}
}
