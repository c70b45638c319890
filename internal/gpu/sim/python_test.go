package sim_test

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/gpu"
	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/sim/wire"
)

// pythonWorkload drives the device through python/gpufeed_simdev.py from a
// real process: 1 ms kernels on a 30 % duty cycle (absolute schedule), then a
// pageable copy, then a device synchronise. It prints what it did as JSON.
const pythonWorkload = `
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev

dev = gpufeed_simdev.connect()
kernel_us, period_ns, run_ns = 1000, 3333333, 1200 * 1000 * 1000
launches, returned = [], []
t0 = time.monotonic_ns()
k = 0
while True:
    due = t0 + k * period_ns
    if due - t0 >= run_ns:
        break
    now = time.monotonic_ns()
    if due > now:
        time.sleep((due - now) / 1e9)
    launches.append(time.monotonic_ns())
    dev.launch(kernel_us)
    returned.append(time.monotonic_ns())
    k += 1
dev.synchronize(0)
before = time.monotonic_ns()
dev.memcpy(64 << 20, kind="h2d", pinned=False)
copy_ns = time.monotonic_ns() - before
dev.synchronize()
json.dump({"pid": os.getpid(), "dev_pid": dev.pid, "kernel_ns": kernel_us * 1000,
           "launches": launches, "returned": returned, "copy_ns": copy_ns}, sys.stdout)
`

type pythonReport struct {
	PID      int     `json:"pid"`
	DevPID   int     `json:"dev_pid"`
	KernelNS int64   `json:"kernel_ns"`
	Launches []int64 `json:"launches"`
	Returned []int64 `json:"returned"`
	CopyNS   int64   `json:"copy_ns"`
}

func TestPythonClientFromARealProcess(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the Python client cannot be exercised")
	}
	pydir, err := filepath.Abs("../../../python")
	if err != nil {
		t.Fatal(err)
	}
	path := startDevice(t, sim.Options{})
	src := observe(t, path)
	bw := 31.5076923e9 * sim.PCIeEfficiency

	cmd := exec.Command(python, "-c", pythonWorkload, pydir)
	cmd.Env = append(os.Environ(), "GPUFEED_SIMDEV="+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if _, err := src.Sample(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	type window struct {
		from, to int64
		s        gpu.Sample
	}
	var windows []window
	last := wire.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var werr error
loop:
	for {
		select {
		case werr = <-exited:
			break loop
		case <-tick.C:
			s := sample1(t, src)
			at := wire.Mono(s.At)
			windows = append(windows, window{last, at, s})
			last = at
		}
	}
	if werr != nil {
		t.Fatalf("python workload: %v\n%s", werr, stderr.String())
	}
	var rep pythonReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("python output %q: %v\nstderr: %s", stdout.String(), err, stderr.String())
	}
	if rep.DevPID != rep.PID {
		t.Errorf("device saw pid %d, the workload is pid %d", rep.DevPID, rep.PID)
	}
	if want := time.Duration(float64(64<<20) / (bw * sim.DefaultPageableFactor) * 1e9); time.Duration(rep.CopyNS) < want {
		t.Errorf("pageable 64 MiB copy returned after %v, want >= %v", time.Duration(rep.CopyNS), want)
	}

	// The model, recomputed from what the workload did: kernels run back to
	// back on stream 0, each placed by the library between the call's start
	// and its return (both stamped by the workload): the device's figure
	// must lie between the two schedules, within a point. (A thread
	// preempted inside the call on a loaded host places its kernel up to
	// milliseconds after the first stamp: against a 57 ms window, the
	// before-stamps alone were 1.7 points off.)
	schedule := func(stamps []int64) [][2]int64 {
		var spans [][2]int64
		var end int64
		for _, ts := range stamps {
			start := max(ts, end)
			end = start + rep.KernelNS
			spans = append(spans, [2]int64{start, end})
		}
		return spans
	}
	if len(rep.Returned) != len(rep.Launches) {
		t.Fatalf("%d launches, %d returns", len(rep.Launches), len(rep.Returned))
	}
	spans, late := schedule(rep.Launches), schedule(rep.Returned)
	busyOf := func(spans [][2]int64, a, b int64) int64 {
		var total int64
		for _, s := range spans {
			if s[1] > a && s[0] < b {
				total += min(b, s[1]) - max(a, s[0])
			}
		}
		return total
	}
	busyIn := func(a, b int64) int64 { return busyOf(spans, a, b) }
	var measured, model float64
	var steady int
	first, lastEnd := spans[0][0], spans[len(spans)-1][1]
	for _, w := range windows {
		want := 100 * float64(busyIn(w.from, w.to)) / float64(w.to-w.from)
		alt := 100 * float64(busyOf(late, w.from, w.to)) / float64(w.to-w.from)
		got := *w.s.UtilPercent
		if got < min(want, alt)-1 || got > max(want, alt)+1 {
			t.Errorf("window %v-%v: device says %.2f %%, the model %.2f %% to %.2f %%", time.Duration(w.from-first), time.Duration(w.to-first), got, want, alt)
		}
		if w.from >= first && w.to <= lastEnd {
			measured += got
			model += want
			steady++
		}
		for _, p := range w.s.Processes {
			if p.PID != rep.PID {
				t.Errorf("process %d on the device, want only the workload's %d", p.PID, rep.PID)
			}
		}
	}
	if steady < 5 {
		t.Fatalf("only %d windows inside the workload's run", steady)
	}
	measured /= float64(steady)
	model /= float64(steady)
	t.Logf("%d launches; steady windows: device %.2f %%, model %.2f %% (duty cycle 30 %%)", len(rep.Launches), measured, model)
	if measured < 25 || measured > 33 {
		t.Errorf("mean utilisation %.2f %% for a 30 %% duty cycle", measured)
	}
}

// pythonBlocking checks the Python client's blocking calls from a real
// process: a full stream blocks the launching thread, streams are shared by
// the process's threads, one thread's synchronize does not hold another
// thread's launches, a graph launch costs one launch, a forked child is a
// process of its own, and every sync mode returns no earlier than the work.
const pythonBlocking = `
import json, os, sys, threading, time
sys.path.insert(0, sys.argv[1])
import gpufeed_simdev

dev = gpufeed_simdev.connect()
ms = 1000 * 1000
out = {}

# max_pending is 8 here: 20 launches of 10 ms must wait for 12 kernels to end.
t = time.monotonic_ns()
for _ in range(20):
    dev.launch(10000)
out["full_ns"] = time.monotonic_ns() - t
dev.synchronize()

# Thread B synchronises stream 0 (work main submitted: 100 ms) while main
# keeps launching on stream 1 without waiting. The clock starts before the
# first launch: no kernel can start before it is submitted, so the five end
# no earlier than 100 ms after start.
start = time.monotonic_ns()
for _ in range(5):
    dev.launch(20000, stream=0)
synced = {}
def waiter():
    dev.synchronize(0)
    synced["ns"] = time.monotonic_ns() - start
th = threading.Thread(target=waiter)
th.start()
time.sleep(0.005)
t = time.monotonic_ns()
for _ in range(5):
    dev.launch(1000, stream=1)
out["other_stream_launch_ns"] = time.monotonic_ns() - t
th.join()
out["thread_sync_ns"] = synced["ns"]
try:
    dev.memcpy(10, kind="sideways")
except ValueError:
    out["bad_kind"] = "ValueError"

# A graph of twenty 1 ms kernels: one launch, twenty milliseconds of work.
t = time.monotonic_ns()
dev.graph_launch([1000] * 20, stream=2)
out["graph_launch_ns"] = time.monotonic_ns() - t
out["graph_done_at_once"] = dev.query(2)
dev.synchronize(2)
out["graph_ns"] = time.monotonic_ns() - t

# A forked child uses a context of its own, as a process of its own.
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    dev.launch(1000)
    dev.synchronize()
    os.write(w, json.dumps({"pid": dev.pid, "os": os.getpid()}).encode())
    os._exit(0)
os.waitpid(pid, 0)
out["child"] = json.loads(os.read(r, 4096))
out["pid"], out["os_pid"] = dev.pid, os.getpid()
dev.close()

out["modes"] = {}
for mode in ("spin", "yield", "block"):
    d = gpufeed_simdev.connect(sync=mode)
    t = time.monotonic_ns()
    d.launch(20000)
    d.synchronize()
    out["modes"][mode] = [d.sync, time.monotonic_ns() - t]
    d.close()
try:
    gpufeed_simdev.connect(sync="sometimes")
except gpufeed_simdev.SimdevError as e:
    out["bad_sync"] = str(e)
json.dump(out, sys.stdout)
`

func TestPythonClientBlockingCalls(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: the Python client cannot be exercised")
	}
	pydir, err := filepath.Abs("../../../python")
	if err != nil {
		t.Fatal(err)
	}
	path := startDevice(t, sim.Options{MaxPending: 8})
	cmd := exec.Command(python, "-c", pythonBlocking, pydir)
	cmd.Env = append(os.Environ(), "GPUFEED_SIMDEV="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("python: %v\n%s", err, stderr.String())
	}
	var got struct {
		FullNS        int64  `json:"full_ns"`
		OtherStreamNS int64  `json:"other_stream_launch_ns"`
		ThreadSyncNS  int64  `json:"thread_sync_ns"`
		BadKind       string `json:"bad_kind"`
		GraphLaunchNS int64  `json:"graph_launch_ns"`
		GraphAtOnce   bool   `json:"graph_done_at_once"`
		GraphNS       int64  `json:"graph_ns"`
		Child         struct {
			PID, OS int
		} `json:"child"`
		PID     int               `json:"pid"`
		OSPID   int               `json:"os_pid"`
		Modes   map[string][2]any `json:"modes"`
		BadSync string            `json:"bad_sync"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatalf("output %q: %v", b, err)
	}
	if d := time.Duration(got.FullNS); d < 120*time.Millisecond {
		t.Errorf("20 launches of 10 ms into an 8-deep stream returned after %v, want >= 120ms", d)
	}
	if d := time.Duration(got.ThreadSyncNS); d < 100*time.Millisecond {
		t.Errorf("another thread's synchronize(0) returned after %v, want >= 100ms (stream 0 is the process's)", d)
	}
	// The launching thread was not held by the other thread's wait: its five
	// launches took far less than the 100 ms that wait lasted.
	if d := time.Duration(got.OtherStreamNS); d >= 50*time.Millisecond {
		t.Errorf("launches on stream 1 took %v while another thread synchronised: they must not wait", d)
	}
	if got.BadKind != "ValueError" {
		t.Errorf("memcpy with an unknown kind: %q, want ValueError", got.BadKind)
	}
	if d := time.Duration(got.GraphLaunchNS); d > 5*time.Millisecond || got.GraphAtOnce {
		t.Errorf("graph_launch of twenty 1 ms kernels took %v (done at once: %v): one launch, work still queued", d, got.GraphAtOnce)
	}
	if d := time.Duration(got.GraphNS); d < 20*time.Millisecond {
		t.Errorf("the graph's kernels were done after %v, want >= 20ms", d)
	}
	if got.Child.PID != got.Child.OS || got.Child.PID == got.PID || got.PID != got.OSPID {
		t.Errorf("the device saw the child as %d (it is %d), the parent as %d (it is %d)", got.Child.PID, got.Child.OS, got.PID, got.OSPID)
	}
	for _, mode := range []string{"spin", "yield", "block"} {
		m := got.Modes[mode]
		if m[0] != mode {
			t.Errorf("connect(sync=%q) waits by %v", mode, m[0])
		}
		if d := time.Duration(m[1].(float64)); d < 20*time.Millisecond {
			t.Errorf("sync=%s: a 20 ms kernel was synchronised after %v", mode, d)
		}
	}
	if !strings.Contains(got.BadSync, "sometimes") {
		t.Errorf("connect(sync=\"sometimes\"): %q", got.BadSync)
	}
}
