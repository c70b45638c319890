package drill

import (
	"fmt"
	"os"
	"runtime"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/cpuset"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

// Topology is what the jitter drill needs of the CPUs: those this process
// may run on, and which share a core.
type Topology struct {
	Allowed cpuset.Set
	// Siblings maps a CPU to the CPUs of its core (itself included).
	Siblings map[int]cpuset.Set
	// Capacity maps a CPU to its cpu_capacity where the kernel gives it.
	Capacity map[int]uint64
	// SMT says whether any allowed CPU shares its core with another.
	SMT bool
}

// ReadTopology reads the allowed CPUs (sched_getaffinity) and sysfs's
// topology files.
func ReadTopology(fs procfs.FS) (Topology, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return Topology{}, fmt.Errorf("sched_getaffinity: %w", err)
	}
	t := Topology{Siblings: map[int]cpuset.Set{}, Capacity: map[int]uint64{}}
	for c := 0; c < len(set)*64; c++ {
		if set.IsSet(c) {
			t.Allowed = append(t.Allowed, c)
		}
	}
	cpus, err := fs.CPUs()
	if err != nil {
		return Topology{}, fmt.Errorf("reading the CPU topology: %w", err)
	}
	for _, c := range cpus {
		if !t.Allowed.Contains(c.ID) {
			continue
		}
		sib := cpuset.Set{c.ID}
		if c.ThreadSiblings != nil {
			sib = *c.ThreadSiblings
		}
		t.Siblings[c.ID] = sib
		if len(sib.Intersect(t.Allowed)) > 1 {
			t.SMT = true
		}
		if c.Capacity != nil {
			t.Capacity[c.ID] = *c.Capacity
		}
	}
	return t, nil
}

// LaunchCPU picks the CPU to pin the launch thread to: among the allowed
// CPUs, the biggest core (cpu_capacity) first, then one that has an SMT
// sibling (so the sibling experiment can run), then the lowest number.
func (t Topology) LaunchCPU() int {
	best, bestKey := -1, [3]int{}
	for _, c := range t.Allowed {
		k := [3]int{int(t.Capacity[c]), 0, -c}
		if len(t.Siblings[c].Intersect(t.Allowed)) > 1 {
			k[1] = 1
		}
		if best < 0 || slices.Compare(k[:], bestKey[:]) > 0 {
			best, bestKey = c, k
		}
	}
	return best
}

// Core is cpu and its SMT siblings among the allowed CPUs.
func (t Topology) Core(cpu int) cpuset.Set {
	s := t.Siblings[cpu].Intersect(t.Allowed)
	if !s.Contains(cpu) {
		s = append(s, cpu)
		slices.Sort(s)
	}
	return s
}

// pinThread pins the calling OS thread (locked to its goroutine) to cpu,
// and returns how to restore its former affinity.
func pinThread(cpu int) (restore func(), err error) {
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return nil, err
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_setaffinity to CPU %d: %w", cpu, err)
	}
	return func() { unix.SchedSetaffinity(0, &old) }, nil
}

// Machine describes this host in one line: CPU model, CPUs, threads per
// core, kernel.
func Machine(fs procfs.FS, t Topology) string {
	model := ""
	if b, err := os.ReadFile(fs.ProcPath("cpuinfo")); err == nil {
		model, _ = procfs.Field(b, "model name")
	}
	if model == "" {
		model = runtime.GOARCH
	}
	tpc := 1
	for _, s := range t.Siblings {
		tpc = max(tpc, len(s))
	}
	var u unix.Utsname
	kernel := ""
	if unix.Uname(&u) == nil {
		kernel = ", Linux " + unix.ByteSliceToString(u.Release[:])
	}
	return fmt.Sprintf("%s, %d CPUs usable (%d thread(s) per core)%s", model, len(t.Allowed), tpc, kernel)
}
