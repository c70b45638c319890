package demo

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gpufeed/gpufeed/internal/sim/simclient"
)

// WorkloadCommand is the hidden subcommand that runs a Go workload:
// gpufeed __workload NAME [ARGS]. The binary must lock its main goroutine
// to the main thread before main runs (runtime.LockOSThread in an init
// function) when it is invoked so, so that the launching thread is the
// process's main thread, as in a PyTorch job.
const WorkloadCommand = "__workload"

// RunWorkload runs the Go workload name with its arguments and returns the
// process's exit status. Diagnostics go to stderr.
func RunWorkload(name string, args []string) int {
	var err error
	switch name {
	case "oversubscribed":
		err = oversubscribed()
	case "hog":
		err = hog(args)
	default:
		err = fmt.Errorf("no Go workload %q (want oversubscribed or hog)", name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo workload:", err)
		return 2
	}
	return 0
}

// lifetime is how long a workload lives if nobody stops it.
func lifetime() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("GPUFEED_DEMO_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return time.Minute
}

// ready tells the runner the workload is set up.
func ready() {
	fd, err := strconv.Atoi(os.Getenv("GPUFEED_DEMO_READY_FD"))
	if err != nil || fd < 0 {
		return
	}
	f := os.NewFile(uintptr(fd), "ready")
	_, _ = f.WriteString("ready\n")
	_ = f.Close()
}

var sink atomic.Uint64

// spin computes for n iterations (a linear congruential generator the
// compiler cannot drop).
func spin(n int) {
	x := sink.Load() | 1
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink.Store(x)
}

// threadCPU is the calling thread's CPU time (RUSAGE_THREAD).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1, &ru); err != nil { // RUSAGE_THREAD
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// calibrate returns the spin iterations that cost about d of CPU time,
// measured in this thread's CPU time so that competition for the CPU does
// not change the result.
func calibrate(d time.Duration) int {
	n := 1 << 16
	for {
		start := threadCPU()
		spin(n)
		used := threadCPU() - start
		if used >= 20*time.Millisecond {
			return max(1, int(float64(n)*float64(d)/float64(used)))
		}
		n *= 2
	}
}

// Oversubscribed workload: a launch thread that keeps the GPU busy on its
// own (28 us of CPU per 40 us kernel: the queue stays full) shares the CPUs
// with an intra-op pool sized as OpenMP sizes it when OMP_NUM_THREADS is
// unset, twice over (PyTorch's intra-op and inter-op pools both default to
// the core count), whose threads spin between parallel regions
// (OMP_WAIT_POLICY=active). Among them it gets about two fifths of a CPU,
// and the GPU waits. The launch call is about a seventh of its CPU, as in
// a lean launch loop: at 36 us of its own work per launch it was a tenth,
// on the CPU profile's line under which a thread is not launching, and
// attached windows were vetoed to inconclusive in 2 of 5. Launches are few
// enough (about 14,000 a second among the pool, 36,000 alone) that the
// simulated device's server keeps up on a crowded CPU.
const (
	overKernel       = 40 * time.Microsecond
	overCPUPerLaunch = 24 * time.Microsecond // plus about 4 us for the launch's system call
)

func oversubscribed() error {
	pool := 2 * runtime.NumCPU()
	runtime.GOMAXPROCS(pool + 4)
	dev, err := simclient.FromEnv()
	if err != nil {
		return err
	}
	defer dev.Close()
	iters := calibrate(overCPUPerLaunch)
	var stop atomic.Bool
	for i := 0; i < pool; i++ {
		go func() {
			runtime.LockOSThread()
			for !stop.Load() {
				spin(1 << 14)
			}
		}()
	}
	ready()
	end := time.Now().Add(lifetime())
	for n := 0; ; n++ {
		if n%1024 == 0 && time.Now().After(end) {
			break
		}
		spin(iters)
		if err := dev.Launch(overKernel, 0); err != nil {
			stop.Store(true)
			return err
		}
	}
	stop.Store(true)
	return nil
}

// hog spins on one CPU: a noisy neighbour outside the job.
func hog(args []string) error {
	fs := flag.NewFlagSet("hog", flag.ContinueOnError)
	cpu := fs.Int("cpu", 0, "CPU to spin on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	runtime.LockOSThread()
	if err := pinThread(*cpu); err != nil {
		return fmt.Errorf("pinning to cpu%d: %w", *cpu, err)
	}
	end := time.Now().Add(lifetime())
	for time.Now().Before(end) {
		spin(1 << 16)
	}
	return nil
}
