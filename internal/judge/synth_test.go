package judge

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// synth builds small synthetic timelines for the rule tests: n intervals of
// 100 ms, a slow tier every 10 ticks, threads whose CPU and run-queue wait
// per interval, state per tick and blocked readings are given as functions.
type synth struct {
	n     int
	noGPU bool
	util  func(i int) float64 // GPU utilisation of interval i, percent
	rxBps func(i int) float64 // PCIe RX bytes/s of interval i (nil: none)
	clock func(i int) float64 // SM clock MHz at the end of interval i (nil: none)
	// reasons are NVML's clock event reasons in every GPU sample (nil: not read).
	reasons *uint64
	cpus    int
	busy    func(cpu, i int) float64 // host CPU busy percent (nil: 50 %)
	iowait  func(i int) float64
	ended   string
	// firstSight: the first slow tick reads no thread's wait, as the
	// sampler's first sight of a thread does (it waits one slow period).
	firstSight bool
	checks     []finding.Finding
	procs      []*sProc
}

type sProc struct {
	pid, ppid int
	role      string
	env       map[string]string
	cpus      string
	listed    bool // on the device's process list
	channels  []string
	noChan    bool // device channels not read
	exited    bool
	threads   []*sThread
	readBps   float64           // read_bytes per second
	readCall  float64           // bytes per read call
	hidden    map[string]string // NotVisible
}

type sThread struct {
	tid        int
	comm, role string
	cpu, wait  func(i int) float64 // percent of each interval
	state      func(tick int) byte // nil: R when cpu+wait >= 50 else S
	blocked    func(tick int) *timeline.Blocked
	user       float64 // user share of its CPU time, percent (default 80)
	onCPU      int     // the processor it last ran on (stat field 39)
}

const synthDT = int64(100 * time.Millisecond)

func constF(v float64) func(int) float64 { return func(int) float64 { return v } }

func (s *synth) timeline() *timeline.Timeline {
	if s.cpus == 0 {
		s.cpus = 2
	}
	tl := &timeline.Timeline{Procs: map[timeline.ProcKey]*timeline.ProcInfo{}, Threads: map[timeline.ThreadKey]*timeline.ThreadInfo{}}
	tl.Meta = timeline.Meta{SchemaVersion: timeline.SchemaVersion, NumCPU: s.cpus, ClockTick: 100, PageSize: 4096,
		Started: time.Unix(1_700_000_000, 0), Interval: timeline.Duration(100 * time.Millisecond),
		Duration: timeline.Duration(time.Duration(s.n) * 100 * time.Millisecond), Ended: s.ended,
		Tiers:     timeline.Tiers{Slow: timeline.Duration(time.Second), Rollup: timeline.Duration(5 * time.Second)},
		GPUSource: "simulated device at /test.sock"}
	if s.ended == "" {
		tl.Meta.Ended = "duration"
	}
	if len(s.procs) > 0 {
		tl.Meta.Target = timeline.Target{PID: s.procs[0].pid, StartTime: 1}
	}
	if len(s.checks) > 0 {
		tl.Meta.Checks = &timeline.Checks{Statuses: map[string]int{"warn": len(s.checks)}, Findings: s.checks}
	}
	maxClk, gen, width := uint32(1980), 4, 16
	if !s.noGPU {
		tl.Devices = []gpu.DeviceInfo{{Index: 0, Name: "test GPU", MaxSMClockMHz: &maxClk, LinkGenMax: &gen, LinkWidthMax: &width}}
	}
	end := int64(s.n) * synthDT
	for _, p := range s.procs {
		info := &timeline.ProcInfo{Key: timeline.ProcKey{PID: p.pid, StartTime: 1}, PPID: p.ppid, Comm: "python3",
			Cmdline: []string{"python3", "train.py"}, Env: p.env, Role: p.role, CPUsAllowed: p.cpus, FirstSeen: 0, LastSeen: end, Exited: p.exited, NotVisible: p.hidden}
		if !p.noChan {
			info.DeviceChannels = &timeline.DeviceChannels{T: end, Channels: p.channels}
		}
		tl.Procs[info.Key] = info
		for _, th := range p.threads {
			tl.Threads[timeline.ThreadKey{TID: th.tid, StartTime: 1}] = &timeline.ThreadInfo{Key: timeline.ThreadKey{TID: th.tid, StartTime: 1},
				PID: p.pid, Comm: th.comm, Role: th.role, FirstSeen: 0, LastSeen: end}
		}
	}
	type acc struct{ run, wait, utime, stime, vol, invol float64 }
	accs := map[int]*acc{}
	cpuAcc := make([]timeline.CPUTimes, s.cpus)
	ioAcc := map[int]*[3]float64{} // rchar, read_bytes, syscr per pid
	for t := 0; t <= s.n; t++ {
		tk := timeline.Tick{T: int64(t) * synthDT}
		slow := t%10 == 0
		running := 0
		for _, p := range s.procs {
			for _, th := range p.threads {
				a := accs[th.tid]
				if a == nil {
					a = &acc{}
					accs[th.tid] = a
				}
				if t > 0 {
					i := t - 1
					c, w := th.cpu(i), 0.0
					if th.wait != nil {
						w = th.wait(i)
					}
					a.run += c / 100 * float64(synthDT)
					a.wait += w / 100 * float64(synthDT)
					user := th.user
					if user == 0 {
						user = 80
					}
					a.utime += c / 100 * 10 * user / 100 // clock ticks of 10 ms
					a.stime += c / 100 * 10 * (100 - user) / 100
					a.vol += 10
					a.invol += w / 10
				}
				st := byte('S')
				if th.state != nil {
					st = th.state(t)
				} else if i := min(t, s.n-1); th.cpu(i)+fnOr(th.wait, i) >= 50 {
					st = 'R'
				}
				if st == 'R' {
					running++
				}
				ts := timeline.ThreadSample{TID: th.tid, PID: p.pid, State: st, RunNS: uint64(a.run), WaitNS: uint64(a.wait),
					UTime: uint64(a.utime), STime: uint64(a.stime), CPU: th.onCPU}
				if slow {
					ts.Switches = &timeline.Switches{Voluntary: uint64(a.vol), Involuntary: uint64(a.invol)}
					// The sampler's first sight of a thread reads no wait
					// (it waits a slow period to tell an active thread
					// from an idle one): the first slow tick holds none.
					if (st == 'S' || st == 'D') && th.blocked != nil && (t > 0 || !s.firstSight) {
						ts.Blocked = th.blocked(t)
					}
				}
				tk.Threads = append(tk.Threads, ts)
			}
			ps := timeline.ProcSample{PID: p.pid, Threads: len(p.threads), RSSPages: 1000}
			if slow {
				io := ioAcc[p.pid]
				if io == nil {
					io = &[3]float64{}
					ioAcc[p.pid] = io
				}
				if t > 0 { // one second since the previous slow tick
					io[0] += p.readBps
					io[1] += p.readBps
					if p.readCall > 0 {
						io[2] += p.readBps / p.readCall
					}
				}
				fds := 10
				ps.FDs = &fds
				ps.IO = &timeline.IO{RChar: uint64(io[0]), ReadBytes: uint64(io[1]), SyscR: uint64(io[2])}
			}
			tk.Procs = append(tk.Procs, ps)
		}
		hs := &timeline.HostSample{ProcsRunning: running + 1, CPUs: make([]timeline.CPUTimes, s.cpus)}
		if t > 0 {
			for c := range cpuAcc {
				b := 50.0
				if s.busy != nil {
					b = s.busy(c, t-1)
				}
				io := 0.0
				if s.iowait != nil {
					io = s.iowait(t - 1)
				}
				cpuAcc[c].User += uint64(b / 10)
				cpuAcc[c].IOWait += uint64(io / 10)
				cpuAcc[c].Idle += uint64((100 - b - io) / 10)
			}
		}
		for c := range cpuAcc {
			cpuAcc[c].CPU = c
			hs.CPUs[c] = cpuAcc[c]
		}
		tk.Host = hs
		if !s.noGPU && t > 0 {
			i := t - 1
			u := s.util(i)
			gs := gpu.Sample{Index: 0, At: tl.Meta.Started.Add(time.Duration(tk.T)), UtilPercent: &u, LinkGen: &gen, LinkWidth: &width}
			if s.rxBps != nil {
				rx, tx := s.rxBps(i), 0.0
				gs.PCIeRxBytesPerSec, gs.PCIeTxBytesPerSec = &rx, &tx
			}
			if s.clock != nil {
				c := uint32(s.clock(i))
				gs.SMClockMHz = &c
			}
			gs.ClockEventReasons = s.reasons
			for _, p := range s.procs {
				if p.listed {
					gs.Processes = append(gs.Processes, gpu.Process{PID: p.pid})
				}
			}
			tk.GPUs = []gpu.Sample{gs}
		}
		tl.Ticks = append(tl.Ticks, tk)
	}
	return tl
}

func fnOr(f func(int) float64, i int) float64 {
	if f == nil {
		return 0
	}
	return f(i)
}

// judge runs the rules and the classifier over the synthetic timeline.
func (s *synth) judge() (*finding.Verdict, []finding.Finding, *Input) {
	tl := s.timeline()
	a := derive.New(tl)
	v, fs := judgeVF(tl, a)
	in := NewInput(tl, a)
	emitsOnlyItsIDs(in)
	return v, fs, in
}

// emitsOnlyItsIDs runs every rule over in alone and panics (failing the
// test that built in) when one emits an ID it does not declare: `gpufeed
// explain` documents the declared IDs, so an undeclared one would go
// unexplained.
func emitsOnlyItsIDs(in *Input) {
	for _, r := range Rules() {
		if r.EmitsChecks {
			continue
		}
		for _, f := range r.Run(in) {
			if !slices.Contains(r.IDs(), f.ID) {
				panic(fmt.Sprintf("rule %s emitted %s, which it does not declare (Rule.Emits)", r.ID, f.ID))
			}
		}
	}
}

// trainer is a GPU process whose main thread (tid = pid 100) is the launch
// thread, with the given behaviour, listed by the device.
func trainer(main *sThread, more ...*sThread) *sProc {
	main.tid, main.comm, main.role = 100, "python3", "main"
	return &sProc{pid: 100, ppid: 1, role: "trainer", cpus: "0-1", listed: true,
		channels: []string{"socket:[7]"}, threads: append([]*sThread{main}, more...)}
}

// blockedOn returns a blocked reading function that always says the same.
func blockedOn(syscall, on string) func(int) *timeline.Blocked {
	return func(int) *timeline.Blocked { return &timeline.Blocked{Syscall: syscall, On: on} }
}

func findingByID(fs []finding.Finding, id string) *finding.Finding {
	for i := range fs {
		if fs[i].ID == id {
			return &fs[i]
		}
	}
	return nil
}

// judgeVF is Judge's verdict and findings, for the rule tests.
func judgeVF(tl *timeline.Timeline, a *derive.View) (*finding.Verdict, []finding.Finding) {
	j := Judge(tl, a)
	return j.Verdict, j.Findings
}
