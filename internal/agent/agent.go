// Package agent is gpufeed's node agent (gpufeed agent): one process per
// node that finds the processes using a GPU, samples each one's process
// tree continuously on a low tier with the diagnose sampler, keeps the last
// minutes of samples per job in a bounded ring, judges each job window by
// window with the same judgement as diagnose, and exports what it
// concluded as Prometheus metrics. The ring can be fetched as a recording
// that gpufeed report reads, or as the report's text.
//
// It only reads: /proc, /sys, the kernel log and the GPU source, as
// diagnose does; it never signals, pauses or changes what it watches.
package agent

import (
	"context"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/gpufeed/gpufeed/internal/check"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// Defaults for Config's zero values: the agent's low tier. A job's threads
// are read every two seconds (schedstat), their context switches, where
// the sleeping ones wait and the tree's new processes every ten, and the
// job is judged once a minute (30 intervals: the judgement wants 20); ten
// minutes are kept (see docs/AGENT.md and the budget in docs/PERFORMANCE.md).
const (
	DefaultInterval      = 2 * time.Second
	DefaultSlowEvery     = 10 * time.Second
	DefaultRollupEvery   = time.Minute
	DefaultWindow        = time.Minute
	DefaultRing          = 10 * time.Minute
	DefaultDiscoverEvery = 10 * time.Second
	DefaultChecksEvery   = 5 * time.Minute
	// DefaultMaxRingBytes caps one job's ring (compressed), whatever its
	// size: the oldest windows go first.
	DefaultMaxRingBytes = 4 << 20
	// DefaultMaxJobs caps the jobs watched at once (a node has at most a
	// few per GPU); more are counted, not watched.
	DefaultMaxJobs = 64
)

// Config says what the agent watches and how.
type Config struct {
	FS procfs.FS
	// GPU is the opened GPU source (nil: none; then the GPU processes are
	// found by the device nodes they hold open). GPUName names it or says
	// why there is none.
	GPU     gpu.Source
	GPUName string
	// Kmsg reads the kernel log (its Since is set per job).
	Kmsg kernlog.Reader
	// Hostname is the node's name in the labels (dcgm-exporter's
	// Hostname); default os.Hostname.
	Hostname string
	// HostRoot is where the node's own files are (the container runtime's
	// state, read for a pod's names): "" or "/" on the node, the mount
	// point in a container.
	HostRoot string
	// Version is gpufeed's version, written in the header of /report's
	// JSON.
	Version string

	Interval, SlowEvery, RollupEvery time.Duration
	// Window is how long each judged window lasts; Ring how much of the
	// past is kept per job.
	Window, Ring               time.Duration
	DiscoverEvery, ChecksEvery time.Duration
	// PIDs are process trees to watch whether or not a device lists
	// them (a job on a host whose GPU is not in view, a CPU-side stage).
	PIDs         []int
	MaxRingBytes int
	MaxJobs      int

	Tool string
	Log  *slog.Logger
}

func (c *Config) defaults() {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.Interval, DefaultInterval)
	def(&c.SlowEvery, DefaultSlowEvery)
	def(&c.RollupEvery, DefaultRollupEvery)
	def(&c.Window, DefaultWindow)
	def(&c.Ring, DefaultRing)
	def(&c.DiscoverEvery, DefaultDiscoverEvery)
	def(&c.ChecksEvery, DefaultChecksEvery)
	if c.MaxRingBytes <= 0 {
		c.MaxRingBytes = DefaultMaxRingBytes
	}
	if c.MaxJobs <= 0 {
		c.MaxJobs = DefaultMaxJobs
	}
	if c.Hostname == "" {
		c.Hostname, _ = os.Hostname()
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// netTablesTTL is how long one read of a network namespace's socket
// tables, or of the kernel log, serves the jobs whose windows end after it:
// a listening socket opened, or a kernel line written, since shows in the
// next window at the latest.
const netTablesTTL = 10 * time.Second

// Agent watches a node's GPU jobs.
type Agent struct {
	cfg  Config
	gpu  *sharedSource // nil without a GPU source
	self int

	mu     sync.Mutex
	jobs   map[timeline.ProcKey]*job
	probes map[string]*probeState
	checks []finding.CheckOutcome
	// checksTL is the platform checks' outcome as diagnose keeps it in a
	// timeline, added to every window so the judgement folds them in.
	checksTL *timeline.Checks
	// deaths already counted, by pid and cause, so that one death read in
	// the kernel log by several jobs' windows is counted once.
	deaths     map[deathKey]time.Time
	notWatched int
	found      string
	// listeners are the HTTP listeners whose connections are counted.
	listeners []namedLimit

	// finishing lets one job at a time finish its window: judging and
	// packing a window is the agent's peak of memory and CPU, and jobs
	// found together end their windows together.
	finishing sync.Mutex

	wg sync.WaitGroup
}

type deathKey struct {
	pid   int
	cause string
}

// probeState is the last run of one probe: the agent's own health.
type probeState struct {
	ok       bool
	duration time.Duration
	at       time.Time
	err      string
	runs     uint64
	failures uint64
}

// New prepares an agent.
func New(cfg Config) *Agent {
	cfg.defaults()
	if cfg.FS.NetTables == nil {
		// Every job on the host's network reads the same socket tables at
		// the end of its window; the windows end one after another.
		cfg.FS.NetTables = procfs.NewNetTables(netTablesTTL)
	}
	if cfg.Kmsg.Shared == nil {
		// One read of the kernel log serves the windows that end together.
		cfg.Kmsg.Shared = kernlog.NewShared(netTablesTTL)
	}
	a := &Agent{cfg: cfg, self: os.Getpid(), jobs: map[timeline.ProcKey]*job{}, probes: map[string]*probeState{},
		deaths: map[deathKey]time.Time{}}
	if cfg.GPU != nil {
		a.gpu = newSharedSource(cfg.GPU, cfg.Interval)
	}
	return a
}

// probe runs fn, records its success and duration under name, and
// returns its error. A probe that fails leaves the agent and its scrapes
// running: its failure is a metric.
func (a *Agent) probe(name string, fn func() error) error {
	t0 := time.Now()
	err := fn()
	d := time.Since(t0)
	a.mu.Lock()
	p := a.probes[name]
	if p == nil {
		p = &probeState{}
		a.probes[name] = p
	}
	p.ok, p.duration, p.at = err == nil, d, time.Now()
	p.runs++
	p.err = ""
	if err != nil {
		p.failures++
		p.err = err.Error()
	}
	a.mu.Unlock()
	if err != nil {
		a.cfg.Log.Warn("probe failed", "probe", name, "err", err)
	}
	return err
}

// Run watches until ctx ends: discovery every DiscoverEvery starts a
// watcher per new GPU process tree; the platform checks run every
// ChecksEvery.
func (a *Agent) Run(ctx context.Context) error {
	defer a.wg.Wait()
	a.runChecks(ctx)
	lastChecks := time.Now()
	tick := time.NewTicker(a.cfg.DiscoverEvery)
	defer tick.Stop()
	for {
		a.discoverOnce(ctx)
		a.prune()
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if time.Since(lastChecks) >= a.cfg.ChecksEvery {
			a.runChecks(ctx)
			lastChecks = time.Now()
		}
	}
}

// runChecks runs gpufeed check's platform checks (no process: the
// platform as the agent's own view shows it) with the same GPU source.
func (a *Agent) runChecks(ctx context.Context) {
	_ = a.probe("checks", func() error {
		opts := check.Options{ProcRoot: a.cfg.FS.Proc, SysRoot: a.cfg.FS.Sys}
		if a.gpu != nil {
			opts.GPU = a.gpu
		}
		res := check.Run(ctx, opts)
		c := &timeline.Checks{Statuses: map[string]int{}, Findings: check.Findings(res)}
		for _, r := range res {
			c.Statuses[string(r.Status)]++
		}
		a.mu.Lock()
		a.checks, a.checksTL = res, c
		a.mu.Unlock()
		return ctx.Err()
	})
}

func (a *Agent) discoverOnce(ctx context.Context) {
	var samples []gpu.Sample
	if a.gpu != nil {
		_ = a.probe("gpu", func() error {
			var err error
			samples, err = a.gpu.Sample()
			return err
		})
	}
	var f found
	err := a.probe("discover", func() error {
		var err error
		f, err = discover(a.cfg.FS, samples, true, a.self)
		return err
	})
	if err != nil {
		return
	}
	for _, pid := range a.cfg.PIDs {
		st, err := procfs.ReadStatOnce(a.cfg.FS.PidPath(pid, "stat"))
		if err != nil {
			continue // not (or no longer) there: its job, if any, has ended
		}
		k := timeline.ProcKey{PID: pid, StartTime: st.StartTime}
		if f.roots[k] == nil {
			f.roots[k] = &gpuProc{key: k, ppid: st.PPID, comm: string(st.Comm)}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.found = f.how
	a.notWatched = 0
	keys := make([]timeline.ProcKey, 0, len(f.roots))
	for k := range f.roots {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].PID < keys[j].PID })
	for _, k := range keys {
		r := f.roots[k]
		if j := a.jobs[k]; j != nil {
			if !j.ended() {
				j.setDevices(r.devices, r.byNode)
			}
			continue
		}
		if a.watching() >= a.cfg.MaxJobs {
			a.notWatched++
			continue
		}
		j := newJob(a, r)
		a.jobs[k] = j
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			j.watch(ctx)
		}()
	}
}

// watching counts the jobs still watched (a.mu held).
func (a *Agent) watching() int {
	n := 0
	for _, j := range a.jobs {
		if !j.ended() {
			n++
		}
	}
	return n
}

// prune forgets ended jobs once their ring has aged out, and deaths
// counted longer ago than two rings.
func (a *Agent) prune() {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := time.Now()
	for k, j := range a.jobs {
		if at, ok := j.endedAt(); ok && now.Sub(at) > a.cfg.Ring {
			delete(a.jobs, k)
		}
	}
	for k, at := range a.deaths {
		if now.Sub(at) > 2*a.cfg.Ring {
			delete(a.deaths, k)
		}
	}
}

// countDeath says whether a death is new to the agent, and remembers it.
func (a *Agent) countDeath(pid int, cause string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := deathKey{pid, cause}
	if _, ok := a.deaths[k]; ok {
		return false
	}
	a.deaths[k] = time.Now()
	return true
}

// platformChecks returns the latest checks' outcome for a window.
func (a *Agent) platformChecks() *timeline.Checks {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.checksTL == nil {
		return nil
	}
	c := *a.checksTL
	return &c
}

// Job returns the job whose tree is rooted at pid, or nil.
func (a *Agent) Job(pid int) *job {
	a.mu.Lock()
	defer a.mu.Unlock()
	var best *job
	for k, j := range a.jobs {
		if k.PID == pid && (best == nil || j.started.After(best.started)) {
			best = j
		}
	}
	return best
}

// jobAt returns the job whose tree is rooted at the process k, or nil.
func (a *Agent) jobAt(k timeline.ProcKey) *job {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.jobs[k]
}

type namedLimit struct {
	name  string
	limit *ConnLimit
}

// CountConnections exports l's connections as the listener named name.
func (a *Agent) CountConnections(name string, l *ConnLimit) {
	a.mu.Lock()
	a.listeners = append(a.listeners, namedLimit{name, l})
	a.mu.Unlock()
}

// Close waits for the watchers (after Run's context ended).
func (a *Agent) Close() { a.wg.Wait() }
