package agent

import (
	"bytes"
	"context"
	"os/exec"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/sample"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// sampleWorkload samples a real process with a busy thread and twenty
// sleeping ones, on fast and slow ticks.
func sampleWorkload(t *testing.T) *timeline.Timeline {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH")
	}
	cmd := exec.Command(py, "-c", `
import threading, time, sys
stop = threading.Event()
for _ in range(20):
    threading.Thread(target=stop.wait, daemon=True).start()
def busy():
    while True:
        sum(range(1000))
threading.Thread(target=busy, daemon=True).start()
print("ready", flush=True)
time.sleep(60)
`)
	out, _ := cmd.StdoutPipe()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil || !strings.HasPrefix(string(buf), "ready") {
		t.Fatalf("workload not ready: %q %v", buf, err)
	}
	fs, err := procfs.NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	s, err := sample.New(sample.Config{FS: fs, PID: cmd.Process.Pid, Interval: 50 * time.Millisecond, Duration: 2 * time.Second,
		SlowEvery: 200 * time.Millisecond, RollupEvery: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	tl, err := s.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// TestPackRoundTrip: a window packed for the ring and unpacked is the
// recording of the window as sampled, sample for sample, and most of the
// sleeping threads' samples were left out of the packed recording.
func TestPackRoundTrip(t *testing.T) {
	tl := sampleWorkload(t)
	var full bytes.Buffer
	if err := timeline.Encode(&full, tl); err != nil {
		t.Fatal(err)
	}
	want, _, err := timeline.Decode(bytes.NewReader(full.Bytes()), "full")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, tk := range want.Ticks {
		total += len(tk.Threads)
	}
	p, err := pack(tl)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, tk := range tl.Ticks {
		kept += len(tk.Threads)
	}
	got, _, err := unpack(p, "packed")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Ticks) != len(want.Ticks) {
		t.Fatalf("%d ticks unpacked, %d sampled", len(got.Ticks), len(want.Ticks))
	}
	for i := range want.Ticks {
		if !reflect.DeepEqual(got.Ticks[i], want.Ticks[i]) {
			t.Fatalf("tick %d differs:\n got %+v\nwant %+v", i, got.Ticks[i].Threads, want.Ticks[i].Threads)
		}
	}
	if kept*3 > total {
		t.Errorf("%d of %d thread samples kept: the sleeping threads' repeats were not left out", kept, total)
	}
	t.Logf("%d of %d thread samples kept; %d bytes packed, %d as a recording", kept, total, p.size(), full.Len())
}

// TestUnpackRefusesInconsistentOrder: a sample order that does not match
// the recording is an error naming the window, never a made-up sample.
func TestUnpackRefusesInconsistentOrder(t *testing.T) {
	tl := sampleWorkload(t)
	p, err := pack(tl)
	if err != nil {
		t.Fatal(err)
	}
	other := sampleWorkload(t)
	q, err := pack(other)
	if err != nil {
		t.Fatal(err)
	}
	bad := packed{rec: p.rec, order: q.order}
	if _, _, err := unpack(bad, "window 3 of the ring"); err == nil || !strings.Contains(err.Error(), "window 3 of the ring") {
		t.Errorf("mismatched order: %v", err)
	}
}
