package drill

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/drillresult"
	"github.com/gpufeed/gpufeed/internal/procfs"
)

//go:embed cow_workers.py
var cowScript string

// CowOptions size the copy-on-write drill.
type CowOptions struct {
	// Python is the interpreter (default: Debian's /usr/bin/python3 when
	// present, else python3 on PATH).
	Python string
	// Items in the dataset (default 1,000,000), Workers forked (default
	// 4), Passes each worker makes over the whole dataset (default 1).
	Items, Workers, Passes int
	// Interval between readings of the workers' memory (default 200 ms).
	Interval time.Duration
}

// DefaultPython is the interpreter the Python drills run by default.
func DefaultPython() string {
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		return "/usr/bin/python3"
	}
	return "python3"
}

// cowRun is one storage's run: USS of each worker at each reading.
type cowRun struct {
	storage, flat string
	pids          []int
	at            []time.Duration // since the workers were released
	uss           [][]uint64      // per reading, per worker
}

// Cow runs the copy-on-write drill: a Python parent builds a dataset (a
// list of small tuples, then the same numbers in one flat numpy array),
// forks workers as a DataLoader with the fork start method does, and each
// worker reads every item in a shuffled order. gpufeed reads each
// worker's unique memory (USS: private clean + dirty, from smaps_rollup)
// while they run.
func Cow(ctx context.Context, fs procfs.FS, opt CowOptions) (*drillresult.Report, error) {
	if opt.Python == "" {
		opt.Python = DefaultPython()
	}
	if opt.Items <= 0 {
		opt.Items = 1_000_000
	}
	if opt.Workers <= 0 {
		opt.Workers = 4
	}
	if opt.Passes <= 0 {
		opt.Passes = 1
	}
	if opt.Interval <= 0 {
		opt.Interval = 200 * time.Millisecond
	}
	topo, err := ReadTopology(fs)
	if err != nil {
		return nil, err
	}
	rep := &drillresult.Report{Drill: "cow", Machine: Machine(fs, topo), ReferenceFrom: ReferenceFrom,
		Title: fmt.Sprintf("%d forked workers reading %d items each in a shuffled order: a list of Python tuples versus flat storage", opt.Workers, opt.Items)}
	var runs []*cowRun
	for _, storage := range []string{"list", "flat"} {
		r, err := cowOnce(ctx, fs, opt, storage)
		if err != nil {
			return nil, fmt.Errorf("cow, %s storage: %w", storage, err)
		}
		runs = append(runs, r)
	}
	const mib = 1 << 20
	tab := drillresult.Table{ID: "cow", Title: "USS of the workers, from their release to the end of their pass (per worker: mean [range])",
		Columns: []drillresult.Column{
			{Key: "uss_per_worker_start_bytes", Label: "per worker, start", Unit: drillresult.Bytes},
			{Key: "uss_per_worker_end_bytes", Label: "end", Unit: drillresult.Bytes},
			{Key: "uss_sum_start_bytes", Label: "sum, start", Unit: drillresult.Bytes},
			{Key: "uss_sum_end_bytes", Label: "end", Unit: drillresult.Bytes},
		}}
	for _, r := range runs {
		first, last := r.uss[0], r.uss[len(r.uss)-1]
		row := drillresult.Row{Key: r.storage, Measured: []*drillresult.Value{perWorker(first), perWorker(last), drillresult.V(float64(sum(first))), drillresult.V(float64(sum(last)))}}
		if r.storage == "list" {
			row.Label = "list of Python objects"
			row.Reference = []*drillresult.Value{drillresult.V(60 * mib), drillresult.V(439 * mib), drillresult.V(240 * mib), drillresult.V(1756 * mib)}
		} else {
			row.Label = "flat storage (" + r.flat + ")"
			row.Reference = []*drillresult.Value{drillresult.V(8 * mib), drillresult.V(8 * mib), nil, nil}
			if r.flat != "numpy" {
				row.Note = "numpy is not importable by " + opt.Python + ": the flat storage is a bytes object"
				rep.Notes = append(rep.Notes, row.Note)
			}
		}
		tab.Rows = append(tab.Rows, row)
	}
	rep.Tables = append(rep.Tables, tab)
	for _, r := range runs {
		d := drillresult.Table{ID: "uss_over_time_" + r.storage, Title: "USS over time, " + r.storage + " storage", Detail: true,
			Columns: []drillresult.Column{
				{Key: "at_ns", Label: "since release", Unit: drillresult.Nanoseconds},
				{Key: "uss_per_worker_bytes", Label: "USS per worker (mean)", Unit: drillresult.Bytes},
				{Key: "uss_sum_bytes", Label: "sum of USS", Unit: drillresult.Bytes},
			}}
		for i, at := range r.at {
			d.Rows = append(d.Rows, drillresult.Row{Key: fmt.Sprintf("reading_%d", i), Label: fmt.Sprintf("#%d", i+1),
				Measured:  []*drillresult.Value{drillresult.V(float64(at)), perWorker(r.uss[i]), drillresult.V(float64(sum(r.uss[i])))},
				Reference: []*drillresult.Value{nil, nil, nil}})
		}
		rep.Tables = append(rep.Tables, d)
	}
	rep.Notes = append(rep.Notes,
		"USS is what a worker alone holds (private clean + private dirty pages, smaps_rollup); RSS does not show the growth because the shared pages were already resident",
		"reading a Python object writes its reference count, so the page holding it is copied into the worker; a flat buffer is read without a write and stays shared: keep datasets in numpy arrays, Arrow or mmap'd files, not lists of objects")
	return rep, nil
}

func perWorker(v []uint64) *drillresult.Value {
	if len(v) == 0 {
		return nil
	}
	return drillresult.R(float64(sum(v))/float64(len(v)), float64(slices.Min(v)), float64(slices.Max(v)))
}

func sum(v []uint64) uint64 {
	var s uint64
	for _, x := range v {
		s += x
	}
	return s
}

func cowOnce(ctx context.Context, fs procfs.FS, opt CowOptions, storage string) (*cowRun, error) {
	cmd := exec.CommandContext(ctx, opt.Python, "-c", cowScript, storage, fmt.Sprint(opt.Items), fmt.Sprint(opt.Workers), fmt.Sprint(opt.Passes))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", opt.Python, err)
	}
	defer func() {
		stdin.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	failed := func(what string) error {
		stdin.Close()
		cmd.Wait()
		return fmt.Errorf("%s: %s", what, strings.TrimSpace(stderr.String()))
	}
	var hello struct {
		Workers []int  `json:"workers"`
		Flat    string `json:"flat"`
	}
	select {
	case l, ok := <-lines:
		if !ok {
			return nil, failed("the Python parent ended before forking its workers")
		}
		if err := json.Unmarshal([]byte(l), &hello); err != nil || len(hello.Workers) != opt.Workers {
			return nil, fmt.Errorf("the Python parent wrote %q: want its workers' pids", l)
		}
	case <-time.After(5 * time.Minute):
		return nil, errors.New("the Python parent did not fork its workers within 5 minutes")
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	r := &cowRun{storage: storage, flat: hello.Flat, pids: hello.Workers}
	read := func(at time.Duration) error {
		row := make([]uint64, len(r.pids))
		for i, pid := range r.pids {
			ro, err := fs.ReadRollup(pid)
			if err != nil {
				return fmt.Errorf("reading worker %d's memory: %w", pid, err)
			}
			row[i] = ro.USS
		}
		r.at = append(r.at, at)
		r.uss = append(r.uss, row)
		return nil
	}
	if err := read(0); err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return nil, failed("releasing the workers")
	}
	tick := time.NewTicker(opt.Interval)
	defer tick.Stop()
	for left := len(r.pids); left > 0; {
		select {
		case l, ok := <-lines:
			if !ok {
				return nil, failed("the Python parent ended before its workers finished")
			}
			if strings.Contains(l, `"done"`) {
				left--
			}
		case <-tick.C:
			if err := read(time.Since(start)); err != nil {
				return nil, err
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := read(time.Since(start)); err != nil {
		return nil, err
	}
	return r, nil
}
