package sim

import "sort"

// span is a half-open time interval [start, end) in CLOCK_MONOTONIC nanoseconds.
type span struct{ start, end int64 }

// spanSet is a union of spans: sorted, disjoint and never touching (touching
// spans are merged), so a fully busy device is a single span however many
// operations it ran.
type spanSet struct{ s []span }

// add merges [a, b) into the set.
func (u *spanSet) add(a, b int64) {
	if b <= a {
		return
	}
	n := len(u.s)
	// Fast path: the new span starts at or after the last one (operations on
	// one stream arrive in order).
	if n == 0 || a > u.s[n-1].end {
		u.s = append(u.s, span{a, b})
		return
	}
	if a >= u.s[n-1].start {
		if b > u.s[n-1].end {
			u.s[n-1].end = b
		}
		return
	}
	// i: first span that ends at or after a (it touches or follows [a, b)).
	i := sort.Search(n, func(k int) bool { return u.s[k].end >= a })
	// j: first span that starts after b (it stays separate).
	j := sort.Search(n, func(k int) bool { return u.s[k].start > b })
	if i == j {
		u.s = append(u.s, span{})
		copy(u.s[i+1:], u.s[i:])
		u.s[i] = span{a, b}
		return
	}
	merged := span{min(a, u.s[i].start), max(b, u.s[j-1].end)}
	u.s[i] = merged
	u.s = append(u.s[:i+1], u.s[j:]...)
}

// busy returns how much of [a, b) the set covers.
func (u *spanSet) busy(a, b int64) int64 {
	if b <= a {
		return 0
	}
	var total int64
	i := sort.Search(len(u.s), func(k int) bool { return u.s[k].end > a })
	for ; i < len(u.s) && u.s[i].start < b; i++ {
		total += min(b, u.s[i].end) - max(a, u.s[i].start)
	}
	return total
}

// covers says whether t falls inside a span.
func (u *spanSet) covers(t int64) bool {
	i := sort.Search(len(u.s), func(k int) bool { return u.s[k].end > t })
	return i < len(u.s) && u.s[i].start <= t
}

// each calls fn with the parts of the set inside [a, b), in order.
func (u *spanSet) each(a, b int64, fn func(s, e int64)) {
	i := sort.Search(len(u.s), func(k int) bool { return u.s[k].end > a })
	for ; i < len(u.s) && u.s[i].start < b; i++ {
		fn(max(a, u.s[i].start), min(b, u.s[i].end))
	}
}

// pruneBefore forgets the spans that end at or before t.
func (u *spanSet) pruneBefore(t int64) {
	i := sort.Search(len(u.s), func(k int) bool { return u.s[k].end > t })
	if i == 0 {
		return
	}
	if i == len(u.s) {
		u.s = u.s[:0]
		return
	}
	// Reslicing keeps the old head alive until the next reallocation; copy
	// when the head is most of the array so memory stays bounded.
	if i > len(u.s)-i {
		u.s = append(make([]span, 0, 2*(len(u.s)-i)+8), u.s[i:]...)
		return
	}
	u.s = u.s[i:]
}

// transfer is one copy on the link: bytes moved evenly over [start, end).
type transfer struct {
	start, end int64
	bytes      uint64
}

// transferLog holds the copies of one direction of the link. The direction's
// copy engine serialises them, so they are sorted and never overlap.
type transferLog struct{ t []transfer }

func (l *transferLog) add(start, end int64, bytes uint64) {
	if end <= start || bytes == 0 {
		return
	}
	l.t = append(l.t, transfer{start, end, bytes})
}

// bytesIn returns the bytes moved during [a, b), each copy contributing in
// proportion to its overlap with the window.
func (l *transferLog) bytesIn(a, b int64) float64 {
	if b <= a {
		return 0
	}
	var total float64
	i := sort.Search(len(l.t), func(k int) bool { return l.t[k].end > a })
	for ; i < len(l.t) && l.t[i].start < b; i++ {
		x := l.t[i]
		overlap := min(b, x.end) - max(a, x.start)
		total += float64(x.bytes) * float64(overlap) / float64(x.end-x.start)
	}
	return total
}

func (l *transferLog) pruneBefore(t int64) {
	i := sort.Search(len(l.t), func(k int) bool { return l.t[k].end > t })
	if i == 0 {
		return
	}
	if i > len(l.t)-i {
		l.t = append(make([]transfer, 0, 2*(len(l.t)-i)+8), l.t[i:]...)
		return
	}
	l.t = l.t[i:]
}
