package agent

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/podinfo"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/sample"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Cause labels beside the bottleneck classes: GPU idle time no cause
// explains, and the idle time of a job that is stalled or idle (nothing
// fed the GPU because nothing progressed, or nothing asked for work).
const causeUnexplained = "unexplained"

// job is one watched GPU process tree: its ring of recorded windows and
// what its windows were judged.
type job struct {
	a       *Agent
	key     timeline.ProcKey
	comm    string
	started time.Time

	// uids are the root process's real, effective and saved uids when
	// first watched (uidsKnown: they could be read): whose job it is, for
	// the clients of the detail socket.
	uids      [3]uint32
	uidsKnown bool

	mu      sync.Mutex
	id      JobID
	devices []int
	byNode  bool
	ring    []chunk
	ringLen int
	// What the last window was judged.
	verdict  *finding.Verdict
	judgedAt time.Time
	windows  uint64
	// Counters over the job's life as the agent watched it, in seconds.
	observed, runqWait float64
	cgroup             cgroupSnap // the target's cgroups at the last window (cgroup_metrics.go)
	starved            map[string]float64
	deaths             map[string]float64
	// cowCopied is what the forked workers copied of their parent's memory
	// at the end of the last window; nil when none was read.
	cowCopied *float64
	// straggler is the rank the others waited for in the last window; nil
	// when none was named.
	straggler *stragglerSnap
	done      bool
	doneAt    time.Time
	doneWhy   string
}

// chunk is one window kept in the ring.
type chunk struct {
	started time.Time
	seconds float64
	p       packed
}

func newJob(a *Agent, r *gpuProc) *job {
	j := &job{a: a, key: r.key, comm: r.comm, started: time.Now(), devices: append([]int(nil), r.devices...), byNode: r.byNode,
		starved: map[string]float64{}, deaths: map[string]float64{}}
	j.uids, j.uidsKnown = readUIDs(a.cfg.FS.PidPath(r.key.PID, "status"))
	return j
}

func (j *job) setDevices(devs []int, byNode bool) {
	j.mu.Lock()
	j.devices, j.byNode = append([]int(nil), devs...), byNode
	j.mu.Unlock()
}

func (j *job) ended() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.done
}

func (j *job) endedAt() (time.Time, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.doneAt, j.done
}

func (j *job) end(why string) {
	j.mu.Lock()
	j.done, j.doneAt, j.doneWhy = true, time.Now(), why
	j.mu.Unlock()
	j.a.cfg.Log.Info("job no longer watched", "pid", j.key.PID, "comm", j.comm, "why", why)
}

// watch samples the job window after window until it ends or ctx does.
func (j *job) watch(ctx context.Context) {
	fs := j.a.cfg.FS
	paths, _ := fs.CgroupPaths(j.key.PID)
	env, _ := fs.ReadEnvSettled(j.key.PID) // a job found mid-exec keeps its labels
	j.mu.Lock()
	id := ParseJobID(paths, env)
	if id.PodUID != "" {
		id = id.withNames(podinfo.Reader{Proc: fs.Proc, HostRoot: j.a.cfg.HostRoot}.Resolve(j.key.PID, id.ContainerID, env))
	}
	j.id = id
	j.mu.Unlock()
	j.a.cfg.Log.Info("watching job", "pid", j.key.PID, "comm", j.comm, "slurm_job_id", id.SlurmJobID, "pod_uid", id.PodUID,
		"namespace", id.Namespace, "pod", id.Pod, "container", id.Container, "names_from", namesFrom(id))
	failures := 0
	for ctx.Err() == nil {
		switch j.alive() {
		case gone:
			j.end("exited")
			return
		case unknown:
			// The process could not be read (no descriptor left, a
			// transient error): it is not known to have exited, so the
			// job stays watched and is read again an interval later.
			j.wait(ctx, j.a.cfg.Interval)
			continue
		}
		tl, err := j.window(ctx)
		if tl == nil {
			if ctx.Err() != nil {
				return
			}
			if j.alive() == gone {
				j.end("exited")
				return
			}
			// A window that could not start, its root still there: the
			// job stays watched (the failure is the sample probe's) and
			// is tried again, an interval later after a shortage, a
			// window later otherwise.
			failures++
			if failures == 1 {
				j.a.cfg.Log.Warn("window not sampled; the job stays watched", "pid", j.key.PID, "comm", j.comm, "err", err)
			}
			if transient(err) {
				j.wait(ctx, j.a.cfg.Interval)
			} else {
				j.wait(ctx, j.a.cfg.Window)
			}
			continue
		}
		failures = 0
		if ctx.Err() != nil && len(tl.Ticks) < 2 {
			return // the agent stops: a window cut at once says nothing
		}
		ended := tl.Meta.Ended
		j.a.finishing.Lock()
		j.finish(ctx, tl)
		j.a.finishing.Unlock()
		// The sampler lost every process of the tree: the job ended only
		// if its root is confirmed gone (the next turn reads it again).
		if ended == "target exited" {
			if j.alive() == gone {
				j.end("exited")
				return
			}
			j.wait(ctx, j.a.cfg.Interval)
		}
	}
}

// liveness is what a read of the job's root process says of it.
type liveness int

const (
	alive liveness = iota
	// gone: /proc/PID is not there, holds a zombie, or holds another
	// process (the pid was reused: another start time).
	gone
	// unknown: the read failed otherwise (EMFILE, ENFILE, ENOMEM, EIO):
	// nothing is known of the process.
	unknown
)

// alive reads the job's root process: gone only when its /proc entry is
// confirmed absent or holds a process with another start time.
func (j *job) alive() liveness {
	fs := j.a.cfg.FS
	st, err := procfs.ReadStatOnce(fs.PidPath(j.key.PID, "stat"))
	switch {
	case err == nil && st.StartTime == j.key.StartTime && st.State != 'Z' && st.State != 'X':
		return alive
	case err == nil:
		return gone // exited (a zombie, its parent yet to reap it), or the pid reused
	case procfs.IsVanished(err):
		return gone
	}
	_ = j.a.probe("liveness", func() error { return err })
	return unknown
}

// transient says whether err is a shortage the process will get over: no
// descriptor, no memory, an interrupted call.
func transient(err error) bool {
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN, syscall.EINTR, syscall.ENOBUFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// wait sleeps d, or until ctx ends.
func (j *job) wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// window samples one window of the job.
func (j *job) window(ctx context.Context) (*timeline.Timeline, error) {
	c := j.a.cfg
	cfg := sample.Config{FS: c.FS, PID: j.key.PID, Interval: c.Interval, Duration: c.Window,
		SlowEvery: c.SlowEvery, RollupEvery: c.RollupEvery, DiscoverEvery: c.SlowEvery, GPUSource: c.GPUName, Tool: c.Tool,
		SharedProcess: true}
	if j.a.gpu != nil {
		cfg.GPU = jobSource{j.a.gpu, j}
	}
	var tl *timeline.Timeline
	err := j.a.probe("sample", func() error {
		s, err := sample.New(cfg)
		if err != nil {
			return err
		}
		var runErr error
		tl, runErr = s.Run(ctx)
		if errors.Is(runErr, context.Canceled) {
			return nil
		}
		return runErr
	})
	return tl, err
}

// finish completes a window as diagnose completes its own (device
// channels, the platform checks, the end-of-window reads: process facts
// and the kernel log), judges it, counts what it found and keeps its
// recording in the ring.
func (j *job) finish(ctx context.Context, tl *timeline.Timeline) {
	fs := j.a.cfg.FS
	var simPaths []string
	if j.a.gpu != nil && j.a.gpu.Path() != "" {
		simPaths = append(simPaths, j.a.gpu.Path())
	}
	dc := procfs.NewChannelProber(fs, simPaths...)
	since := time.Since(tl.Meta.Started).Nanoseconds()
	for _, p := range tl.Procs {
		if p.Exited {
			continue
		}
		if res, err := dc.Channels(p.Key.PID); err == nil {
			p.DeviceChannels = &timeline.DeviceChannels{T: since, Channels: res.Channels, NotVisible: res.NotVisible}
		}
	}
	if c := j.a.platformChecks(); c != nil {
		c.T = since
		tl.Meta.Checks = c
	}
	_ = j.a.probe("end-of-window", func() error {
		diagnose.EndOfWindow{FS: fs, Kmsg: j.a.cfg.Kmsg}.Read(ctx, tl, nil)
		for _, e := range tl.Events {
			if e.Kind == timeline.EventKernelLogUnavailable {
				return errors.New("kernel log: " + e.Text)
			}
		}
		return nil
	})

	// One judgement, read as it is: its series, its deaths, its verdict.
	var v *derive.View
	var jd *judge.Judgement
	_ = j.a.probe("judge", func() error {
		v = derive.New(tl)
		jd = judge.Judge(tl, v)
		return nil
	})
	in, verdict, series := jd.Input, jd.Verdict, jd.Series

	measured, runq := 0.0, 0.0
	for i, iv := range series.Intervals {
		if i < len(series.GPUUtil) && !math.IsNaN(series.GPUUtil[i]) {
			measured += iv.Seconds()
		}
		if series.Launch != "" && i < len(series.LaunchWait) && !math.IsNaN(series.LaunchWait[i]) {
			runq += series.LaunchWait[i] / 100 * iv.Seconds()
		}
	}
	cg := lastCgroup(tl, j.key.PID) // before packing thins the ticks
	var newDeaths []string
	for _, d := range jd.Deaths {
		if j.a.countDeath(d.PID, d.Cause) {
			newDeaths = append(newDeaths, d.Cause)
		}
	}

	// Kept in the ring last: packing thins the timeline's ticks.
	samples := 0
	for _, tk := range tl.Ticks {
		samples += len(tk.Threads)
	}
	var p packed
	encErr := j.a.probe("record", func() error {
		var err error
		p, err = pack(tl)
		return err
	})

	j.a.cfg.Log.Debug("window judged", "pid", j.key.PID, "verdict", verdict.Class, "confidence", verdict.Confidence,
		"missing", verdict.Missing, "seconds", float64(v.WindowNS)/1e9, "thread_samples", samples,
		"kept", keptSamples(tl), "recording_bytes", len(p.rec), "order_bytes", len(p.order))
	j.mu.Lock()
	defer j.mu.Unlock()
	j.verdict, j.judgedAt = verdict, time.Now()
	j.windows++
	j.cowCopied = nil
	if len(in.Frozen.COW) > 0 {
		c := 0.0
		for _, l := range in.Frozen.COW {
			c += l.Copied
		}
		j.cowCopied = &c
	}
	j.straggler = nil
	if st := in.Job.Straggler; st != nil {
		wait := 100.0
		for _, r := range in.Job.Ranks {
			if r.State == judge.RankCollective {
				wait = min(wait, r.Asleep)
			}
		}
		j.straggler = &stragglerSnap{rank: st.Rank, pid: st.Proc.Key.PID, wait: wait / 100}
	}
	j.observed += measured
	j.runqWait += runq
	if cg.info != nil || cg.sample != nil {
		j.cgroup = cg
	}
	at := in.Attribution
	if measured > 0 && !math.IsNaN(at.IdlePct) {
		switch verdict.Class {
		case finding.Stalled, finding.Idle:
			// Nothing fed the GPU because nothing progressed, or nothing
			// asked for work: all its idle time is the verdict's.
			j.starved[string(verdict.Class)] += at.IdlePct / 100 * measured
		default:
			for cls, share := range at.Share {
				name := string(cls)
				if cls == judge.Unexplained {
					name = causeUnexplained
				}
				j.starved[name] += share / 100 * measured
			}
		}
	}
	for _, c := range newDeaths {
		j.deaths[c]++
	}
	if encErr == nil {
		j.ring = append(j.ring, chunk{started: tl.Meta.Started, seconds: float64(v.WindowNS) / 1e9, p: p})
		j.ringLen += p.size()
	}
	j.trim()
}

// trim drops the windows older than the ring and, past the byte cap, the
// oldest ones (j.mu held).
func (j *job) trim() {
	c := j.a.cfg
	cut := time.Now().Add(-c.Ring)
	n := 0
	for n < len(j.ring) && (j.ring[n].started.Add(time.Duration(j.ring[n].seconds*1e9)).Before(cut) || j.ringLen > c.MaxRingBytes && n < len(j.ring)-1) {
		j.ringLen -= j.ring[n].p.size()
		n++
	}
	if n > 0 {
		j.ring = append([]chunk(nil), j.ring[n:]...)
	}
}

// chunks returns the ring's windows, oldest first.
func (j *job) chunks() []packed {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]packed, len(j.ring))
	for i, c := range j.ring {
		out[i] = c.p
	}
	return out
}

func keptSamples(tl *timeline.Timeline) int {
	n := 0
	for _, tk := range tl.Ticks {
		n += len(tk.Threads)
	}
	return n
}

// namesFrom says where a pod's names were read, for the log: one source
// per name, or what is left as the pod's UID only.
func namesFrom(id JobID) string {
	if id.PodUID == "" {
		return ""
	}
	var parts []string
	for _, f := range []struct{ name, v, from string }{{"namespace", id.Namespace, id.NamespaceFrom}, {"pod", id.Pod, id.PodFrom}, {"container", id.Container, id.ContainerFrom}} {
		if f.v == "" {
			parts = append(parts, f.name+": not on the node (UID only)")
		} else {
			parts = append(parts, f.name+": "+f.from)
		}
	}
	return strings.Join(parts, "; ")
}

// stragglerSnap is the straggler of a job's last window: its rank, its pid,
// and the smallest share of the window (0 to 1) another rank spent waiting
// for it in a collective (the rank-straggler finding's "at least").
type stragglerSnap struct {
	rank string
	pid  int
	wait float64
}
