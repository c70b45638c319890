package drill

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/drillresult"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/profile"
	"github.com/gpufeed/gpufeed/internal/syscalls"
)

//go:embed train_step.py
var trainScript string

// SyscallsOptions size the syscalls drill.
type SyscallsOptions struct {
	// Python is the interpreter with PyTorch (default as DefaultPython).
	Python string
	// Workers are the DataLoader's worker processes (default 2).
	Workers int
	// Window is how long the system calls are counted (default 5 s).
	Window time.Duration
}

// The reference's top rows (strace -c -f of the same kind of loop).
var syscallReference = map[string][2]float64{ // share of syscall time in %, calls
	"futex":   {57.96, 9649},
	"poll":    {28.74, 195},
	"ioctl":   {4.61, 3115},
	"accept4": {1.83, 128},
}

// Syscalls runs the syscalls drill: a small training loop with DataLoader
// worker processes, its system calls counted in the kernel for a window
// by gpufeed's eBPF syscall summary (every thread of the trainer and its
// workers), as a per-call table.
func Syscalls(ctx context.Context, fs procfs.FS, opt SyscallsOptions) (*drillresult.Report, error) {
	if opt.Python == "" {
		opt.Python = DefaultPython()
	}
	if opt.Workers <= 0 {
		opt.Workers = 2
	}
	if opt.Window <= 0 {
		opt.Window = 5 * time.Second
	}
	if err := syscalls.Check(fs.ProcPath("")); err != nil {
		return nil, err
	}
	topo, err := ReadTopology(fs)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, opt.Python, "-c", trainScript, fmt.Sprint(opt.Workers), fmt.Sprint((opt.Window + 3*time.Second).Seconds()))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", opt.Python, err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	hello := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			hello <- sc.Text()
		}
		close(hello)
		for sc.Scan() {
		}
	}()
	var ready struct {
		Ready   int    `json:"ready"`
		Workers []int  `json:"workers"`
		Device  string `json:"device"`
	}
	select {
	case l, ok := <-hello:
		if !ok {
			cmd.Wait()
			return nil, fmt.Errorf("the training loop ended before it ran: %s", lastLines(stderr.String(), 5))
		}
		if err := json.Unmarshal([]byte(l), &ready); err != nil || ready.Ready <= 0 {
			return nil, fmt.Errorf("the training loop wrote %q: want its pid and its workers'", l)
		}
	case <-time.After(3 * time.Minute):
		return nil, errors.New("the training loop did not start within 3 minutes (importing torch?)")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	sum, err := syscalls.Summarize(ctx, append([]int{ready.Ready}, ready.Workers...), opt.Window, syscalls.Options{Proc: fs.ProcPath("")})
	if err != nil {
		return nil, err
	}
	rep := &drillresult.Report{Drill: "syscalls", Machine: Machine(fs, topo), ReferenceFrom: ReferenceFrom,
		Title: fmt.Sprintf("the system calls of a small training loop (PyTorch on %s, a DataLoader with %d worker processes) over %.1f s, every thread of the trainer and its workers",
			ready.Device, len(ready.Workers), opt.Window.Seconds())}
	tab := drillresult.Table{ID: "syscalls", Title: "system calls by time inside them, summed over all threads (as strace -c -f -w)",
		Columns: []drillresult.Column{
			{Key: "time_percent", Label: "% time", Unit: drillresult.Percent},
			{Key: "time_ns", Label: "time", Unit: drillresult.Nanoseconds},
			{Key: "calls_count", Label: "calls", Unit: drillresult.Count},
			{Key: "errors_count", Label: "errors", Unit: drillresult.Count},
		}}
	var total int64
	for _, r := range sum.Totals {
		total += r.TimeNS
	}
	shown := map[string]bool{}
	add := func(r profile.SyscallStat) {
		share := 0.0
		if total > 0 {
			share = 100 * float64(r.TimeNS) / float64(total)
		}
		row := drillresult.Row{Key: r.Name, Label: r.Name,
			Measured:  []*drillresult.Value{drillresult.V(share), drillresult.V(float64(r.TimeNS)), drillresult.V(float64(r.Calls)), drillresult.V(float64(r.Errors))},
			Reference: []*drillresult.Value{nil, nil, nil, nil}}
		if ref, ok := syscallReference[r.Name]; ok {
			row.Reference = []*drillresult.Value{drillresult.V(ref[0]), nil, drillresult.V(ref[1]), nil}
		}
		if r.Name == "accept4" {
			row.Note = "tensors handed over by file descriptor passing"
		}
		tab.Rows = append(tab.Rows, row)
		shown[r.Name] = true
	}
	for i, r := range sum.Totals {
		if i < 12 {
			add(r)
		}
	}
	for _, name := range []string{"futex", "poll", "ioctl", "accept4"} {
		if !shown[name] {
			add(sum.Total(name))
		}
	}
	rep.Tables = append(rep.Tables, tab)
	th := drillresult.Table{ID: "threads", Title: "the threads with the most time in system calls", Detail: true,
		Columns: []drillresult.Column{
			{Key: "time_ns", Label: "time in syscalls", Unit: drillresult.Nanoseconds},
			{Key: "calls_count", Label: "calls", Unit: drillresult.Count},
		}}
	for i, t := range sum.Threads {
		if i == 10 {
			break
		}
		label := fmt.Sprintf("pid %d tid %d %s", t.PID, t.TID, t.Comm)
		if len(t.Syscalls) > 0 {
			label += " (mostly " + t.Syscalls[0].Name + ")"
		}
		th.Rows = append(th.Rows, drillresult.Row{Key: fmt.Sprintf("tid_%d", t.TID), Label: label,
			Measured: []*drillresult.Value{drillresult.V(float64(t.TimeNS)), drillresult.V(float64(t.Calls))}, Reference: []*drillresult.Value{nil, nil}})
	}
	rep.Tables = append(rep.Tables, th)
	if sum.Dropped > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d syscall exits did not fit the kernel's table and are not in these rows", sum.Dropped))
	}
	rep.Notes = append(rep.Notes,
		"time is wall-clock time inside each call, summed over all threads, counted in the kernel (eBPF on raw_syscalls): futex leads because threads wait on each other (the main thread for the next batch, the pin-memory thread for a worker, the GIL), not because futexes are slow",
		"thousands of ioctls per step mean the CUDA driver allocates or synchronises in the loop; on a machine without a GPU there are few",
		"the reference was counted by strace -c -f, which slows every call; an in-kernel count does not, so calls per second here run higher")
	return rep, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
