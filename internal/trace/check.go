package trace

import "fmt"

// Check verifies the invariants Finish establishes: every index in range,
// ends not before starts, records sorted, links consistent. Readers of
// untrusted files are fuzzed against it.
func (t *Trace) Check() error {
	names := NameID(len(t.Names))
	for i := range t.GPU {
		g := &t.GPU[i]
		switch {
		case g.End < g.Start:
			return fmt.Errorf("gpu op %d ends before it starts", i)
		case g.Name >= names:
			return fmt.Errorf("gpu op %d: name %d out of range", i, g.Name)
		case int(g.Stream) >= len(t.Streams):
			return fmt.Errorf("gpu op %d: stream %d out of range", i, g.Stream)
		case g.Launch >= int32(len(t.Runtime)) || g.Launch < -1:
			return fmt.Errorf("gpu op %d: launch %d out of range", i, g.Launch)
		case g.AmbiguousLaunch && g.Launch >= 0:
			return fmt.Errorf("gpu op %d is linked although its correlation id is not unique", i)
		case g.Launch >= 0 && t.Runtime[g.Launch].Corr != g.Corr:
			return fmt.Errorf("gpu op %d linked to a call with another correlation id", i)
		case i > 0 && (t.GPU[i-1].Stream > g.Stream || t.GPU[i-1].Stream == g.Stream && t.GPU[i-1].Start > g.Start):
			return fmt.Errorf("gpu op %d out of order", i)
		}
	}
	for i := range t.Runtime {
		r := &t.Runtime[i]
		switch {
		case r.End < r.Start:
			return fmt.Errorf("runtime call %d ends before it starts", i)
		case r.Name >= names:
			return fmt.Errorf("runtime call %d: name out of range", i)
		case int(r.Thread) >= len(t.Threads):
			return fmt.Errorf("runtime call %d: thread out of range", i)
		case r.GPU >= int32(len(t.GPU)) || r.GPU < -1:
			return fmt.Errorf("runtime call %d: gpu op %d out of range", i, r.GPU)
		case i > 0 && (t.Runtime[i-1].Thread > r.Thread || t.Runtime[i-1].Thread == r.Thread && t.Runtime[i-1].Start > r.Start):
			return fmt.Errorf("runtime call %d out of order", i)
		}
	}
	for i := range t.CPU {
		c := &t.CPU[i]
		switch {
		case c.End < c.Start:
			return fmt.Errorf("cpu op %d ends before it starts", i)
		case c.Name >= names:
			return fmt.Errorf("cpu op %d: name out of range", i)
		case int(c.Thread) >= len(t.Threads):
			return fmt.Errorf("cpu op %d: thread out of range", i)
		case i > 0 && (t.CPU[i-1].Thread > c.Thread || t.CPU[i-1].Thread == c.Thread && t.CPU[i-1].Start > c.Start):
			return fmt.Errorf("cpu op %d out of order", i)
		}
	}
	return nil
}
