// Package procfacts reads, once near the end of a window, the facts about a
// job's processes that frozen-job triage needs and the per-tick sampler does
// not keep: what the open descriptors are, what of CUDA and of the
// collective-communication libraries each process maps or holds open, the
// memory cgroup limit each lives under, and the sockets it listens on.
package procfacts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gpufeed/gpufeed/internal/probe/cudamaps"
	"github.com/gpufeed/gpufeed/internal/probe/fdkinds"
	"github.com/gpufeed/gpufeed/internal/probe/listen"
	"github.com/gpufeed/gpufeed/internal/probe/memlimit"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Counts says what Fill did.
type Counts struct {
	Read int // processes whose facts were read
	Gone int // processes gone (or their pid reused) before they could be read
}

// Fill reads the facts of every process of tl not seen to exit, under
// procRoot and sysRoot, stamping them with t (nanoseconds since
// Meta.Started). A fact that may not be read is recorded in the process's
// NotVisible map with the privilege that would show it.
func Fill(procRoot, sysRoot string, tl *timeline.Timeline, t int64) Counts {
	var c Counts
	keys := make([]timeline.ProcKey, 0, len(tl.Procs))
	for k, p := range tl.Procs {
		if !p.Exited {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].PID < keys[j].PID })
	for _, k := range keys {
		p := tl.Procs[k]
		if st, err := startTime(procRoot, k.PID); err != nil || (k.StartTime != 0 && st != k.StartTime) {
			c.Gone++
			continue
		}
		gone := false
		note := func(field string, err error) {
			switch {
			case errors.Is(err, fdkinds.ErrGone), errors.Is(err, cudamaps.ErrGone), errors.Is(err, listen.ErrGone):
				gone = true
			case errors.Is(err, fdkinds.ErrNotVisible), errors.Is(err, cudamaps.ErrNotVisible), errors.Is(err, listen.ErrNotVisible):
				if p.NotVisible == nil {
					p.NotVisible = map[string]string{}
				}
				p.NotVisible[field] = err.Error()
			case err != nil:
				if p.NotVisible == nil {
					p.NotVisible = map[string]string{}
				}
				p.NotVisible[field] = err.Error()
			}
		}
		cuda := &timeline.CUDAUse{Mapped: []string{}, DeviceFDs: []string{}}
		cudaRead := false
		if fds, err := fdkinds.Read(procRoot, k.PID, 0); err == nil {
			p.FDKinds = &timeline.FDKinds{T: t, ByKind: fds.ByKind}
			for _, d := range fds.TopDirs {
				p.FDKinds.TopDirs = append(p.FDKinds.TopDirs, timeline.DirCount{Dir: d.Dir, N: d.N})
			}
			cuda.DeviceFDs = append(cuda.DeviceFDs, fds.NvidiaNodes...)
			cudaRead = true
		} else {
			note("fd_kinds", err)
		}
		if u, err := cudamaps.Read(procRoot, k.PID, 0); err == nil {
			cuda.Mapped = append(cuda.Mapped, u.Objects...)
			cudaRead = true
			p.Collectives = &timeline.Collectives{Mapped: append([]string{}, u.Collectives...)}
		} else {
			note("cuda", err)
		}
		if cudaRead {
			p.CUDA = cuda
		}
		if l, err := memlimit.ForPID(procRoot, sysRoot, k.PID); err == nil {
			p.MemCgroup = &timeline.MemCgroup{T: t, Version: l.Version, Path: l.Path, LimitBytes: l.LimitBytes,
				LimitAt: l.LimitAt, UsageBytes: l.UsageBytes}
		} else if !errors.Is(err, memlimit.ErrNoCgroup) {
			note("mem_cgroup", err)
		}
		if socks, err := listen.Read(procRoot, k.PID); err == nil {
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

// startTime reads field 22 of /proc/PID/stat (clock ticks since boot).
func startTime(procRoot string, pid int) (uint64, error) {
	f, err := os.Open(filepath.Join(procRoot, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of %d: expected \"pid (comm) ...\"", pid)
	}
	f2 := strings.Fields(s[i+1:])
	if len(f2) < 20 {
		return 0, fmt.Errorf("stat of %d: expected at least 22 fields, got %d", pid, len(f2)+2)
	}
	return strconv.ParseUint(f2[19], 10, 64)
}
