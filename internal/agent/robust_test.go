package agent

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// TestAgentKeepsJobThroughDescriptorExhaustion: with every descriptor of
// the agent's process taken for longer than a window (as a flood of
// connections took them), reading the job's /proc files fails with EMFILE;
// the job is still running, so it stays watched, with its history, and its
// windows go on once descriptors are free again.
func TestAgentKeepsJobThroughDescriptorExhaustion(t *testing.T) {
	livetest.Need(t)
	pid := startSleep(t, 0)
	cfg := testConfig(t)
	cfg.PIDs = []int{pid}
	a, _ := startAgent(t, cfg)
	j := waitWindows(t, a, pid, 1, 60*time.Second)

	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	low := orig
	low.Cur = uint64(len(fds) + 32)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	for {
		f, err := os.Open("/dev/null")
		if err != nil {
			break
		}
		held = append(held, f)
	}
	// Longer than a window: the window's start and end both fail to read.
	time.Sleep(cfg.Window + 2*time.Second)
	for _, f := range held {
		_ = f.Close()
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if _, ok := j.endedAt(); ok {
		j.mu.Lock()
		why := j.doneWhy
		j.mu.Unlock()
		t.Fatalf("job of pid %d (still running) ended when descriptors ran out: %s", pid, why)
	}
	if got := a.Job(pid); got != j {
		t.Fatalf("job of pid %d replaced: its history is lost", pid)
	}
	j.mu.Lock()
	w := j.windows
	j.mu.Unlock()
	waitWindows(t, a, pid, w+1, 30*time.Second)
}

// TestAgentObserverCostIsTheSamplersOwn: HTTP clients hammering the
// agent cost its process CPU; the report's observer cost is the sampler's
// own, so sampling one sleeping process stays a small share of a core.
func TestAgentObserverCostIsTheSamplersOwn(t *testing.T) {
	livetest.Need(t)
	pid := startSleep(t, 0)
	cfg := testConfig(t)
	cfg.PIDs = []int{pid}
	a, srv := startAgent(t, cfg)
	stop := make(chan struct{})
	done := make(chan struct{}, 2)
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := http.Get(srv.URL + "/metrics")
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}()
	}
	j := waitWindows(t, a, pid, 3, 60*time.Second)
	close(stop)
	<-done
	<-done
	tl, _, err := merge(j.chunks())
	if err != nil {
		t.Fatal(err)
	}
	o := tl.Meta.Observer
	if o == nil || o.WallNS <= 0 {
		t.Fatalf("no observer cost in the ring: %+v", o)
	}
	share := float64(o.CPUUserNS+o.CPUSysNS) / float64(o.WallNS)
	t.Logf("observer %.1f%% of a core over %.1f s, %d thread samples", share*100, float64(o.WallNS)/1e9, o.ThreadSamples)
	if share > 0.10 {
		t.Errorf("observer cost %.1f%% of a core for sampling one sleeping process: the HTTP clients' CPU is counted as the sampler's", share*100)
	}
}

// TestAgentReportTakesStartTimeForReusedPID: two jobs with one pid (the
// first one's root exited and the pid was reused) are both listed, with
// their start times; /report?pid=&start= reads the one asked for. A bad
// parameter is echoed cut.
func TestAgentReportTakesStartTimeForReusedPID(t *testing.T) {
	livetest.Need(t)
	light(t)
	pid := startSleep(t, 0)
	cfg := testConfig(t)
	cfg.PIDs = []int{pid}
	a, srv := startAgent(t, cfg)
	j := waitWindows(t, a, pid, 1, 60*time.Second)
	// The newer job rooted at the same pid: no window judged yet.
	newer := newJob(a, &gpuProc{key: timeline.ProcKey{PID: pid, StartTime: j.key.StartTime + 1000}, comm: "reused"})
	newer.started = time.Now().Add(time.Hour)
	a.mu.Lock()
	a.jobs[newer.key] = newer
	a.mu.Unlock()

	base := srv.URL + "/report?pid=" + strconv.Itoa(pid)
	if code, body := get(t, base); code != http.StatusServiceUnavailable {
		t.Errorf("/report?pid= alone: %d %q, want the newest job's (no window yet: 503)", code, body)
	}
	if code, body := get(t, base+"&start="+strconv.FormatUint(j.key.StartTime, 10)); code != http.StatusOK || !strings.Contains(body, "VERDICT") {
		t.Errorf("/report of the older job by its start time: %d\n%.500s", code, body)
	}
	if code, body := get(t, srv.URL+"/recording?pid="+strconv.Itoa(pid)+"&start="+strconv.FormatUint(j.key.StartTime, 10)); code != http.StatusOK {
		t.Errorf("/recording of the older job by its start time: %d %.300s", code, body)
	}
	if code, body := get(t, base+"&start=7"); code != http.StatusNotFound {
		t.Errorf("/report with a start time of no job: %d %q, want 404", code, body)
	}
	_, index := get(t, srv.URL+"/")
	for _, want := range []string{strconv.FormatUint(j.key.StartTime, 10), strconv.FormatUint(newer.key.StartTime, 10)} {
		if !strings.Contains(index, want) {
			t.Errorf("/ does not list start time %s:\n%s", want, index)
		}
	}
	long := strings.Repeat("A", 5000)
	for _, q := range []string{"/report?pid=" + long, "/report?pid=" + strconv.Itoa(pid) + "&start=" + long,
		"/report?pid=" + strconv.Itoa(pid) + "&format=" + long} {
		code, body := get(t, srv.URL+q)
		if code != http.StatusBadRequest || len(body) > 400 {
			t.Errorf("%.40s...: %d, %d bytes, want 400 echoing at most a short cut of the value:\n%.300s", q, code, len(body), body)
		}
	}
}

// TestAgentEndsJobWhoseRootIsAZombie: a root killed and not yet reaped by
// its parent (a zombie) has exited: the job ends, and does not spin on
// windows of a process that is gone.
func TestAgentEndsJobWhoseRootIsAZombie(t *testing.T) {
	livetest.Need(t)
	light(t)
	c := exec.Command("sleep", "120")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	defer func() {
		if !reaped {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	pid := c.Process.Pid
	cfg := testConfig(t)
	cfg.PIDs = []int{pid}
	a, _ := startAgent(t, cfg)
	j := waitWindows(t, a, pid, 1, 60*time.Second)
	_ = c.Process.Kill() // not waited for: a zombie until the end of the test
	deadline := time.Now().Add(2*cfg.Window + 5*time.Second)
	for time.Now().Before(deadline) {
		if _, ok := j.endedAt(); ok {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	j.mu.Lock()
	done, why, windows := j.done, j.doneWhy, j.windows
	j.mu.Unlock()
	if !done || why != "exited" {
		t.Fatalf("job of a zombie root: ended %v (%q) after %d windows, want ended: exited", done, why, windows)
	}
	if windows > 4 {
		t.Errorf("%d windows judged for a job whose root became a zombie", windows)
	}
	_ = c.Wait()
	reaped = true
}

// FuzzReportQuery: whatever the query, /report and /recording answer with
// a client error or the job, never echo more than a short cut of it, and
// do not panic.
func FuzzReportQuery(f *testing.F) {
	for _, s := range []string{"pid=1", "pid=abc", "pid=1&start=7", "pid=1&start=-1", "pid=99&start=18446744073709551616",
		"pid=1&format=xml", "pid=%00", "pid=" + strings.Repeat("9", 300), "start=1", "pid=1&start=1&start=2", "pid=+1", "pid=0x10"} {
		f.Add(s)
	}
	fs, err := procfs.NewFS("", "")
	if err != nil {
		f.Fatal(err)
	}
	a := New(Config{FS: fs, Hostname: "node-a"})
	j := newJob(a, &gpuProc{key: timeline.ProcKey{PID: 1, StartTime: 7}, comm: "init"})
	a.jobs[j.key] = j
	h := a.Handler(a.Registry())
	f.Fuzz(func(t *testing.T, q string) {
		for _, p := range []string{"/report?", "/recording?"} {
			req := httptest.NewRequest("GET", "/", nil)
			req.URL.Path, req.URL.RawQuery = strings.TrimSuffix(p, "?"), q
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			switch w.Code {
			case http.StatusBadRequest, http.StatusNotFound, http.StatusServiceUnavailable:
			default:
				t.Errorf("%s%q: status %d", p, q, w.Code)
			}
			if w.Body.Len() > 400 {
				t.Errorf("%s%q: %d bytes answered", p, q, w.Body.Len())
			}
		}
	})
}
