//go:build amd64 || arm64

package driverprobe

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu/sim"
	"github.com/gpufeed/gpufeed/internal/gpu/sim/simcuda"
	"github.com/gpufeed/gpufeed/internal/profile"
)

var build struct {
	once      sync.Once
	prog, ptx string
	err       error
}

// workloadBinary compiles testdata/workload.c against the simulated
// driver, once per test binary.
func workloadBinary(t *testing.T) (string, string) {
	t.Helper()
	build.once.Do(func() {
		lib, err := simcuda.Path()
		if err != nil {
			build.err = err
			return
		}
		cc, err := simcuda.Compiler()
		if err != nil {
			build.err = err
			return
		}
		dir, err := os.MkdirTemp("", "gpufeed-driverprobe-")
		if err != nil {
			build.err = err
			return
		}
		if err := simcuda.WriteSources(dir); err != nil {
			build.err = err
			return
		}
		prog := filepath.Join(dir, "workload")
		libDir := filepath.Dir(lib)
		args := append(append([]string{}, cc[1:]...), "-std=gnu11", "-O1", "-Wall", "-Werror", "-I", dir, "-o", prog,
			filepath.Join("testdata", "workload.c"), "-L", libDir, "-lgpufeed-simcuda", "-Wl,-rpath,"+libDir)
		if out, err := exec.Command(cc[0], args...).CombinedOutput(); err != nil {
			build.err = fmt.Errorf("compiling the workload: %v\n%s", err, out)
			return
		}
		build.prog, build.ptx = prog, filepath.Join(dir, "gpufeed_sim_kernel.ptx")
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.prog, build.ptx
}

func serve(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gpu.sock")
	srv, err := sim.Listen(path, sim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return path
}

type workload struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func startWorkload(t *testing.T, env ...string) *workload {
	t.Helper()
	prog, ptx := workloadBinary(t)
	c := exec.Command(prog, ptx)
	c.Env = append(append(os.Environ(), "GPUFEED_SIMDEV="+serve(t)), env...)
	c.Stderr = os.Stderr
	in, _ := c.StdinPipe()
	out, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	w := &workload{cmd: c, in: in, out: bufio.NewScanner(out)}
	t.Cleanup(func() { in.Close(); c.Wait() })
	if !w.out.Scan() || w.out.Text() != "ready" {
		t.Fatalf("workload: want ready, got %q", w.out.Text())
	}
	return w
}

func (w *workload) do(t *testing.T, line string) string {
	t.Helper()
	fmt.Fprintln(w.in, line)
	if !w.out.Scan() {
		t.Fatalf("workload: %s: no answer (%v)", line, w.out.Err())
	}
	return w.out.Text()
}

func need(t *testing.T) {
	t.Helper()
	if err := Check(""); err != nil {
		t.Skipf("not allowed here: %v", err)
	}
}

// The counts are the workload's, exactly, round after round: launches by
// entry point, graph launches, copies with their bytes by direction and
// form, allocations and frees, syncs and the time inside them.
func TestCountsMatchTheWorkload(t *testing.T) {
	need(t)
	w := startWorkload(t)
	w.do(t, "launch 500") // before the probes: not counted
	for round := 0; round < 3; round++ {
		p, err := Start([]int{w.cmd.Process.Pid}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		n := 3000 + 1000*round
		lines := []string{fmt.Sprintf("launch %d", n), "launchex 300", "graph 40", "copy 25", "alloc 12", "sync 5 20"}
		for _, l := range lines {
			if got := w.do(t, l); got != "done" {
				t.Fatalf("%s: %q", l, got)
			}
		}
		d := p.Stop()
		if d.State != profile.StateOn || len(d.Libraries) != 1 || !d.Libraries[0].Simulated || d.Libraries[0].Probes == 0 {
			t.Fatalf("round %d: %+v", round, d)
		}
		th, ok := d.Thread(w.cmd.Process.Pid)
		if !ok {
			t.Fatalf("round %d: no row for the workload's thread: %+v", round, d.Threads)
		}
		want := map[string]uint64{
			"cuLaunchKernel":       uint64(n + 5), // the sync line's kernels too (cuLaunchKernelEx's are its own)
			"cuLaunchKernelEx":     300,
			"cuGraphLaunch":        40,
			"cuMemcpyHtoD_v2":      25,
			"cuMemcpyDtoHAsync_v2": 25,
			"cuMemAlloc_v2":        12,
			"cuMemFree_v2":         12,
			"cuStreamSynchronize":  5 + uint64(len(lines)), // each line ends with one
		}
		for sym, calls := range want {
			if got := th.Call(sym).Calls; got != calls {
				t.Errorf("round %d: %s: %d calls, want %d", round, sym, got, calls)
			}
		}
		if th.Launches != uint64(n+5+300) || th.GraphLaunches != 40 {
			t.Errorf("round %d: launches %d, graph launches %d", round, th.Launches, th.GraphLaunches)
		}
		if c := th.Call("cuMemcpyHtoD_v2"); c.Bytes != 25*4096 || c.Copy != "HtoD" || c.Async {
			t.Errorf("round %d: HtoD %+v", round, c)
		}
		if c := th.Call("cuMemcpyDtoHAsync_v2"); c.Bytes != 25*1000 || c.Copy != "DtoH" || !c.Async {
			t.Errorf("round %d: DtoH async %+v", round, c)
		}
		if th.Allocs != 12 || th.AllocBytes != 12<<20 || th.Frees != 12 {
			t.Errorf("round %d: allocs %d (%d bytes), frees %d", round, th.Allocs, th.AllocBytes, th.Frees)
		}
		if th.SyncNS < int64(5*20*time.Millisecond) || th.SyncNS > d.WindowNS {
			t.Errorf("round %d: %v inside syncs, want at least 100ms (window %v)", round, time.Duration(th.SyncNS), time.Duration(d.WindowNS))
		}
		if d.Dropped != 0 || d.Unmatched != 0 {
			t.Errorf("round %d: dropped %d, unmatched %d", round, d.Dropped, d.Unmatched)
		}
	}
}

// A process that is not watched is not counted, though the probes sit on
// the file it maps too.
func TestOtherProcessesNotCounted(t *testing.T) {
	need(t)
	a, b := startWorkload(t), startWorkload(t)
	p, err := Start([]int{a.cmd.Process.Pid}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.do(t, "launch 100")
	b.do(t, "launch 700")
	d := p.Stop()
	if th, _ := d.Thread(a.cmd.Process.Pid); th.Call("cuLaunchKernel").Calls != 100 {
		t.Errorf("watched: %+v", th)
	}
	if _, ok := d.Thread(b.cmd.Process.Pid); ok {
		t.Errorf("the unwatched process was counted: %+v", d.Threads)
	}
}

// A thread inside a sync when the window ends has its time so far.
func TestInsideSyncAtTheEnd(t *testing.T) {
	need(t)
	w := startWorkload(t)
	p, err := Start([]int{w.cmd.Process.Pid}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(w.in, "sync 1 1500")
	time.Sleep(600 * time.Millisecond)
	d := p.Stop()
	th, _ := d.Thread(w.cmd.Process.Pid)
	if th.InSync == nil || th.InSync.Symbol != "cuStreamSynchronize" || th.InSync.SinceNS < int64(300*time.Millisecond) {
		t.Errorf("inside the sync: %+v", th)
	}
	if !w.out.Scan() || w.out.Text() != "done" {
		t.Fatal("workload did not finish the sync")
	}
}

func TestDriverMappings(t *testing.T) {
	maps := strings.Join([]string{
		"7f0000000000-7f0000100000 r--p 00000000 fd:01 1234 /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05",
		"7f0000100000-7f0000900000 r-xp 00100000 fd:01 1234 /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05",
		"7f0000900000-7f0000a00000 r-xp 00000000 fd:01 99 /home/u/.cache/gpufeed/simcuda-x/libgpufeed-simcuda.so (deleted)",
		"7f0000a00000-7f0000b00000 r-xp 00000000 fd:01 55 /usr/lib/libcudart.so.12",
		"7f0000b00000-7f0000c00000 r-xp 00000000 fd:01 1234 /usr/lib/x86_64-linux-gnu/libcuda.so.535.104.05",
		"garbage",
	}, "\n")
	got := driverMappings([]byte(maps))
	if len(got) != 2 || got[0].inode != 1234 || got[1].path != "/home/u/.cache/gpufeed/simcuda-x/libgpufeed-simcuda.so (deleted)" {
		t.Fatalf("%+v", got)
	}
	_ = strconv.Itoa
}
