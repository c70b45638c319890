package diagnose

import (
	"errors"
	"sort"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// procFactsCounts says what fillProcFacts did.
type procFactsCounts struct {
	Read int // processes whose facts were read
	Gone int // processes gone (or their pid reused) before they could be read
}

// fillProcFacts reads, once near the end of a window, the facts about a
// job's processes that frozen-job judgement needs and the per-tick sampler
// does not keep: what the open descriptors are, what of CUDA and of the
// collective-communication libraries each process maps or holds open, the
// memory cgroup limit each lives under, and the sockets it listens on. It
// reads them for every process of tl not seen to exit, under fs, stamping
// them with t (nanoseconds since Meta.Started). A fact that may not be read
// is recorded in the process's NotVisible map with the privilege that would
// show it.
func fillProcFacts(fs procfs.FS, tl *timeline.Timeline, t int64) procFactsCounts {
	var c procFactsCounts
	keys := make([]timeline.ProcKey, 0, len(tl.Procs))
	for k, p := range tl.Procs {
		if !p.Exited {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].PID < keys[j].PID })
	for _, k := range keys {
		p := tl.Procs[k]
		if st, err := fs.StartTime(k.PID); err != nil || (k.StartTime != 0 && st != k.StartTime) {
			c.Gone++
			continue
		}
		gone := false
		note := func(field string, err error) {
			switch {
			case procfs.IsVanished(err):
				gone = true
			case err != nil:
				if p.NotVisible == nil {
					p.NotVisible = map[string]string{}
				}
				p.NotVisible[field] = err.Error()
			}
		}
		cuda := &timeline.CUDAUse{Mapped: []string{}, DeviceFDs: []string{}}
		cudaRead := false
		if fds, err := fs.FDKinds(k.PID, 0); err == nil {
			p.FDKinds = &timeline.FDKinds{T: t, ByKind: fds.ByKind}
			for _, d := range fds.TopDirs {
				p.FDKinds.TopDirs = append(p.FDKinds.TopDirs, timeline.DirCount{Dir: d.Dir, N: d.N})
			}
			cuda.DeviceFDs = append(cuda.DeviceFDs, fds.NvidiaNodes...)
			cudaRead = true
		} else {
			note("fd_kinds", err)
		}
		if u, err := fs.Mappings(k.PID, 0); err == nil {
			cuda.Mapped = append(cuda.Mapped, u.Objects...)
			cuda.DriverAPI = fs.DriverAPILibraries(k.PID, u.Executables)
			cudaRead = true
			p.Collectives = &timeline.Collectives{Mapped: append([]string{}, u.Collectives...)}
		} else {
			note("cuda", err)
		}
		if cudaRead {
			p.CUDA = cuda
		}
		if l, err := fs.MemCgroup(k.PID); err == nil {
			p.MemCgroup = &timeline.MemCgroup{T: t, Version: l.Version, Path: l.Path, LimitBytes: l.LimitBytes,
				LimitAt: l.LimitAt, UsageBytes: l.UsageBytes}
		} else if !errors.Is(err, procfs.ErrNoMemCgroup) {
			note("mem_cgroup", err)
		}
		if socks, err := fs.Listening(k.PID); err == nil {
			p.Listening = &timeline.Listening{T: t, Sockets: []timeline.ListenSocket{}}
			for _, s := range socks {
				p.Listening.Sockets = append(p.Listening.Sockets, timeline.ListenSocket{Proto: s.Proto, Addr: s.Addr, Inode: s.Inode})
			}
		} else {
			note("listening", err)
		}
		if gone {
			c.Gone++
			continue
		}
		c.Read++
	}
	return c
}
