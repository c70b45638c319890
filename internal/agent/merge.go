package agent

import (
	"errors"
	"fmt"

	"github.com/gpufeed/gpufeed/internal/timeline"
)

// errEmptyRing: a job watched for less than one window has no recording yet.
var errEmptyRing = errors.New("no window of this job is complete yet")

// merge joins a job's windows, oldest first, into one timeline: what
// gpufeed report reads. Times are moved onto the first window's clock
// (each window's samples count from its own start); the processes' and
// threads' facts are the latest window's; a kernel log line read again by
// a later window is kept once; the samplers' counts and costs add up.
// Between two windows lie the end-of-window reads (milliseconds): the
// interval across them is longer than the others, not missing.
func merge(chunks []packed) (*timeline.Timeline, []string, error) {
	if len(chunks) == 0 {
		return nil, nil, errEmptyRing
	}
	var out *timeline.Timeline
	var notes []string
	seenKernel := map[string]bool{}
	var last int64 = -1
	for i, b := range chunks {
		tl, warns, err := unpack(b, fmt.Sprintf("window %d of the ring", i+1))
		if err != nil {
			return nil, nil, err
		}
		notes = append(notes, warns...)
		var off int64
		if out == nil {
			out = &timeline.Timeline{Meta: tl.Meta, Procs: map[timeline.ProcKey]*timeline.ProcInfo{},
				Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{}}
			out.Meta.Observer = nil
			out.Meta.Notes = nil
		} else {
			off = tl.Meta.Started.Sub(out.Meta.Started).Nanoseconds()
		}
		for _, tk := range tl.Ticks {
			tk.T += off
			if tk.T <= last {
				continue // a clock step between windows: keep time moving on
			}
			last = tk.T
			out.Ticks = append(out.Ticks, tk)
		}
		for k, p := range tl.Procs {
			q := *p
			q.FirstSeen += off
			q.LastSeen += off
			if prev := out.Procs[k]; prev != nil && prev.FirstSeen < q.FirstSeen {
				q.FirstSeen = prev.FirstSeen
			}
			shiftT(&q, off)
			out.Procs[k] = &q
		}
		for k, t := range tl.Threads {
			u := *t
			u.FirstSeen += off
			u.LastSeen += off
			if prev := out.Threads[k]; prev != nil && prev.FirstSeen < u.FirstSeen {
				u.FirstSeen = prev.FirstSeen
			}
			out.Threads[k] = &u
		}
		for _, e := range tl.Events {
			if e.Kind == timeline.EventKernelLog || e.Kind == timeline.EventKernelLogUnavailable || e.Kind == timeline.EventKernelLogCapped {
				k := e.Kind + "\x00" + e.Text
				if seenKernel[k] {
					continue
				}
				seenKernel[k] = true
			}
			e.T += off
			out.Events = append(out.Events, e)
		}
		if len(tl.Devices) > 0 {
			out.Devices = tl.Devices
		}
		c := &out.Counts
		c.VanishedThreads += tl.Counts.VanishedThreads
		c.VanishedProcs += tl.Counts.VanishedProcs
		c.Overruns += tl.Counts.Overruns
		c.ReadErrors += tl.Counts.ReadErrors
		c.RollupSkipped += tl.Counts.RollupSkipped
		if o := tl.Meta.Observer; o != nil {
			if out.Meta.Observer == nil {
				out.Meta.Observer = &timeline.Observer{}
			}
			m := out.Meta.Observer
			m.CPUUserNS += o.CPUUserNS
			m.CPUSysNS += o.CPUSysNS
			m.WallNS += o.WallNS
			m.ThreadSamples += o.ThreadSamples
			m.TickP50NS = max(m.TickP50NS, o.TickP50NS)
			m.TickMaxNS = max(m.TickMaxNS, o.TickMaxNS)
			if o.Sched != "" {
				m.Sched, m.SchedNotBPF = o.Sched, o.SchedNotBPF
				m.Waits, m.WaitsNotBPF = o.Waits, o.WaitsNotBPF
				m.SchedMissed += o.SchedMissed
			}
		}
		for _, n := range tl.Meta.Notes {
			if !containsString(out.Meta.Notes, n) {
				out.Meta.Notes = append(out.Meta.Notes, n)
			}
		}
		if ch := tl.Meta.Checks; ch != nil {
			cc := *ch
			cc.T += off
			out.Meta.Checks = &cc
		}
		out.Meta.Ended = tl.Meta.Ended
		out.Meta.Target.ExitCode = tl.Meta.Target.ExitCode
		if d := off + int64(tl.Meta.Duration); d > int64(out.Meta.Duration) {
			out.Meta.Duration = timeline.Duration(d)
		}
	}
	if len(chunks) > 1 {
		out.Meta.Notes = append(out.Meta.Notes, fmt.Sprintf("the agent's last %d windows, joined", len(chunks)))
	}
	return out, notes, nil
}

// shiftT moves the times of a process's once-read facts onto the joined clock.
func shiftT(p *timeline.ProcInfo, off int64) {
	if p.DeviceChannels != nil {
		d := *p.DeviceChannels
		d.T += off
		p.DeviceChannels = &d
	}
	if p.FDKinds != nil {
		f := *p.FDKinds
		f.T += off
		p.FDKinds = &f
	}
	if p.MemCgroup != nil {
		m := *p.MemCgroup
		m.T += off
		p.MemCgroup = &m
	}
	if p.Cgroup != nil {
		c := *p.Cgroup
		c.T += off
		p.Cgroup = &c
	}
	if p.Listening != nil {
		l := *p.Listening
		l.T += off
		p.Listening = &l
	}
}

func containsString(v []string, s string) bool {
	for _, x := range v {
		if x == s {
			return true
		}
	}
	return false
}
