package sample

import (
	"errors"
	"path/filepath"
	"strings"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The slow tier reads each process's cgroups: where they lie and what they
// limit on the process's first slow tick and every cgroupLimitsEvery after
// (a limit can be changed while the job runs: docker update, a kubelet
// resize), their counters (cpu.stat throttling, memory usage, anon and
// page cache, memory events, pids) on every slow tick. Processes sharing
// cgroups share one read per tick.

// cgroupLimitsEvery is how often a process's cgroups and limits are read
// again.
const cgroupLimitsEvery = 5 * time.Second

// cgroupState is a process's resolved cgroups.
type cgroupState struct {
	cg     procfs.Cgroup
	lim    procfs.CgroupLimits
	readAt time.Duration
	none   bool // no cgroup hierarchy visible: not asked again
}

// cgroupTick shares one tick's counter reads among processes of the same
// cgroups.
type cgroupTick struct {
	t    int64
	byID map[string]*timeline.CgroupSample
}

// slowCgroup reads p's cgroups (limits when due) and counters into ps.
func (s *Sampler) slowCgroup(p *trackedProc, ps *timeline.ProcSample, t int64) {
	st := p.cgroup
	if st != nil && st.none {
		return
	}
	if st == nil || time.Duration(t)-st.readAt >= cgroupLimitsEvery {
		cg, err := s.fs.Cgroups(p.pid)
		if err != nil {
			if errors.Is(err, procfs.ErrNoCgroupMount) {
				p.cgroup = &cgroupState{none: true}
				return
			}
			s.fieldError(p, t, "cgroup", err)
			return
		}
		st = &cgroupState{cg: cg, lim: cg.Limits(), readAt: time.Duration(t)}
		p.cgroup = st
		p.info.Cgroup = cgroupInfo(st, t)
	}
	key := st.lim.CPULimitAt + "\x00" + st.lim.MemoryDir + "\x00" + st.lim.PidsDir
	if st.cg.CPU != nil && st.lim.CPULimitAt == "" {
		key += "\x00" + st.cg.CPU.Dir
	}
	if s.cgTick.t != t || s.cgTick.byID == nil {
		s.cgTick = cgroupTick{t: t, byID: map[string]*timeline.CgroupSample{}}
	}
	if cs, ok := s.cgTick.byID[key]; ok {
		ps.Cgroup = cs
		return
	}
	k := st.cg.Counters(st.lim)
	cs := &timeline.CgroupSample{}
	if k.HaveCPU {
		cs.CPU = &timeline.CgroupCPU{NrPeriods: k.NrPeriods, NrThrottled: k.NrThrottled, ThrottledNs: k.ThrottledNs}
	}
	if k.HaveMem {
		m := &timeline.CgroupMem{Usage: k.MemUsage, High: k.High, Max: k.Max, OOM: k.OOM, OOMKill: k.OOMKill,
			UnderOOM: k.UnderOOM, Events: k.HaveEvent}
		if k.HaveStat {
			a, f := k.Anon, k.File
			m.Anon, m.File = &a, &f
		}
		cs.Mem = m
	}
	if k.HavePids {
		v := k.PidsCurrent
		cs.PidsCurrent = &v
	}
	if c := p.info.Cgroup; c != nil && len(k.NotVisible) > 0 {
		// A fresh record, never an edit of one already handed out.
		nc := *c
		nc.NotVisible = map[string]string{}
		for f, why := range c.NotVisible {
			nc.NotVisible[f] = why
		}
		for f, why := range k.NotVisible {
			nc.NotVisible[f] = why
		}
		p.info.Cgroup = &nc
	}
	if cs.CPU == nil && cs.Mem == nil && cs.PidsCurrent == nil {
		cs = nil
	}
	s.cgTick.byID[key] = cs
	ps.Cgroup = cs
}

// cgroupInfo is the timeline's record of st's limits, cgroups named as the
// kernel names them (the directory under the hierarchy's mount).
func cgroupInfo(st *cgroupState, t int64) *timeline.Cgroup {
	l := st.lim
	c := &timeline.Cgroup{T: t, Mode: st.cg.Mode, CPUQuotaUs: l.CPUQuotaUs, CPUPeriodUs: l.CPUPeriodUs,
		CPUWeight: l.CPUWeight, CPUShares: l.CPUShares, CPUSet: l.CPUSet, MemMax: l.MemMax, MemHigh: l.MemHigh,
		PidsMax: l.PidsMax}
	if cc := st.cg.CPU; cc != nil {
		c.CPUVersion, c.CPUPath = cc.Version, cc.Path
		if l.CPULimitAt != "" {
			c.CPULimitAt = cgroupName(cc, l.CPULimitAt)
		}
	}
	if cc := st.cg.Memory; cc != nil {
		c.MemVersion, c.MemPath = cc.Version, cc.Path
		if l.MemLimitAt != "" {
			c.MemLimitAt = cgroupName(cc, l.MemLimitAt)
		}
	}
	if len(l.NotVisible) > 0 {
		c.NotVisible = map[string]string{}
		for k, v := range l.NotVisible {
			c.NotVisible[k] = v
		}
	}
	return c
}

// cgroupName turns a cgroup directory into its name as the kernel gives
// it: the process's cgroup path with the part below dir cut.
func cgroupName(cc *procfs.CgroupController, dir string) string {
	below, err := filepath.Rel(dir, cc.Dir)
	if err != nil || strings.HasPrefix(below, "..") {
		return dir
	}
	if below == "." {
		return cc.Path
	}
	name := cc.Path
	for range strings.Split(below, string(filepath.Separator)) {
		name = filepath.Dir(name)
	}
	return name
}
