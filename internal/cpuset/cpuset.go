// Package cpuset is the kernel's list format for sets of CPUs and NUMA
// nodes ("0-3,8,10-11"), as /proc/PID/status, sysfs and the kernel command
// line write it. It is a leaf: probes, checks, rules and GPU code all use it
// without importing one another.
package cpuset

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxID bounds CPU and node numbers accepted from a list; the kernel's
// NR_CPUS tops out at 8192, so anything larger is a corrupt or hostile input
// and must not make a parser allocate gigabytes.
const MaxID = 1 << 16

// Set is a sorted set of CPU (or NUMA node) numbers.
type Set []int

// Parse parses the kernel's list format: "0-3,8,10-11", with the
// optional stride groups "0-15:2/4" (use 2 of every 4). An empty string is the
// empty set.
func Parse(s string) (Set, error) {
	s = strings.TrimSpace(s)
	var out []int
	if s == "" {
		return Set{}, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		rng, group, hasGroup := strings.Cut(part, ":")
		lo, hi, err := parseRange(rng)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		used, size := 1, 1
		if hasGroup {
			u, g, ok := strings.Cut(group, "/")
			if !ok {
				return nil, fmt.Errorf("cpu list %q: group %q: want used/size", s, group)
			}
			if used, err = strconv.Atoi(u); err != nil || used < 1 {
				return nil, fmt.Errorf("cpu list %q: group %q: want a positive used count", s, group)
			}
			if size, err = strconv.Atoi(g); err != nil || size < used {
				return nil, fmt.Errorf("cpu list %q: group %q: want size >= used", s, group)
			}
		}
		for base := lo; base <= hi; base += size {
			for i := base; i < base+used && i <= hi; i++ {
				out = append(out, i)
			}
		}
	}
	slices.Sort(out)
	return Set(slices.Compact(out)), nil
}

func parseRange(s string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if lo, err = parseCPUID(a); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseCPUID(b); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("range %q runs backwards", s)
	}
	return lo, hi, nil
}

func parseCPUID(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a CPU number", s)
	}
	if n >= MaxID {
		return 0, fmt.Errorf("CPU number %d above %d", n, MaxID-1)
	}
	return n, nil
}

// String writes the set in the kernel's list format ("0-3,8").
func (c Set) String() string {
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprintf(&b, "%d", c[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", c[i], c[j])
		}
		i = j + 1
	}
	return b.String()
}

// Contains reports whether n is in the set.
func (c Set) Contains(n int) bool {
	_, ok := slices.BinarySearch(c, n)
	return ok
}

// Intersect returns the members of both sets.
func (c Set) Intersect(o Set) Set {
	out := Set{}
	for _, n := range c {
		if o.Contains(n) {
			out = append(out, n)
		}
	}
	return out
}

// Minus returns the members of c not in o.
func (c Set) Minus(o Set) Set {
	out := Set{}
	for _, n := range c {
		if !o.Contains(n) {
			out = append(out, n)
		}
	}
	return out
}

// SubsetOf reports whether every member of c is in o.
func (c Set) SubsetOf(o Set) bool {
	for _, n := range c {
		if !o.Contains(n) {
			return false
		}
	}
	return true
}

// Valid reports whether b is a list Parse accepts, without building the
// set: readers on a sampler's slow tier check a list they keep as text.
// It follows Parse step by step (same trimming, same number syntax).
func Valid(b []byte) bool {
	b = bytes.TrimSpace(b)
	for len(b) > 0 {
		var part []byte
		part, b, _ = bytes.Cut(b, []byte(","))
		part = bytes.TrimSpace(part)
		if len(part) == 0 {
			continue
		}
		rng, group, hasGroup := bytes.Cut(part, []byte(":"))
		a, z, isRange := bytes.Cut(rng, []byte("-"))
		lo, ok := validID(a)
		if !ok {
			return false
		}
		if isRange {
			hi, ok := validID(z)
			if !ok || hi < lo {
				return false
			}
		}
		if hasGroup {
			u, g, ok := bytes.Cut(group, []byte("/"))
			if !ok {
				return false
			}
			used, err := strconv.Atoi(string(u))
			if err != nil || used < 1 {
				return false
			}
			if size, err := strconv.Atoi(string(g)); err != nil || size < used {
				return false
			}
		}
	}
	return true
}

// validID is parseCPUID without the error text.
func validID(b []byte) (int, bool) {
	n, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	return n, err == nil && n >= 0 && n < MaxID
}
