package agent

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/demo"
	"github.com/gpufeed/gpufeed/internal/diagnose"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/kernlog"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/procfs"
	"github.com/gpufeed/gpufeed/internal/sim"
	"github.com/gpufeed/gpufeed/internal/testjob"
	"github.com/gpufeed/gpufeed/internal/timeline"
)

// The agent watching real workloads: the demo's scenarios on their own
// simulated GPU, and a real three-rank job one of whose ranks the kernel
// OOM-kills in a memory cgroup.

func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }

// light marks a live test whose job uses no CPU to speak of and whose
// checks measure none (HTTP answers, labels, pod names, an OOM kill
// counted, a zombie root, copies held): such tests run side by side once the package's
// serial ones are done (Go holds parallel top-level tests until then), so
// none of them runs beside the descriptor exhaustion test, which lowers
// the process's own descriptor limit, nor beside a test measuring CPU.
func light(t *testing.T) {
	t.Helper()
	t.Parallel()
}

// startScenario starts a built-in scenario and waits until it works.
func startScenario(t *testing.T, name string) *demo.Run {
	t.Helper()
	sc, err := demo.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	exe := clitest.Build(t, "../../cmd/gpufeed")
	run, err := demo.Start(context.Background(), sc, demo.Options{Exe: exe, WorkloadArgs: []string{demo.WorkloadCommand},
		Lifetime: 3 * time.Minute, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Stop)
	return run
}

// testConfig is a short-window agent: 100 ms samples, 3 s windows (30
// intervals, more than the judgement's minimum of 20), a 12 s ring.
func testConfig(t *testing.T) Config {
	fs, err := procfs.NewFS("", "")
	if err != nil {
		t.Fatal(err)
	}
	return Config{FS: fs, Kmsg: kernlog.Reader{Path: kernlog.DefaultPath}, Hostname: "node-a",
		Interval: 100 * time.Millisecond, SlowEvery: 500 * time.Millisecond, RollupEvery: time.Second,
		Window: 3 * time.Second, Ring: 12 * time.Second, DiscoverEvery: 200 * time.Millisecond, ChecksEvery: time.Minute,
		Tool: "gpufeed test"}
}

// startAgent runs an agent until the test ends and serves its endpoints.
func startAgent(t *testing.T, cfg Config) (*Agent, *httptest.Server) {
	t.Helper()
	a := New(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	srv := httptest.NewServer(a.Handler(a.Registry()))
	t.Cleanup(func() { srv.Close(); cancel(); <-done })
	return a, srv
}

// waitWindows waits until the job rooted at pid has had n windows judged.
func waitWindows(t *testing.T, a *Agent, pid int, n uint64, limit time.Duration) *job {
	t.Helper()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if j := a.Job(pid); j != nil {
			j.mu.Lock()
			w := j.windows
			j.mu.Unlock()
			if w >= n {
				return j
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("pid %d: fewer than %d windows judged after %v", pid, n, limit)
	return nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// series finds the samples of a metric family whose labels include want.
func series(t *testing.T, a *Agent, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := a.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue metrics
				}
			}
			out = append(out, m)
		}
	}
	return out
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

// TestAgentLaunchBoundScenario: the agent finds the submission-bound workload
// through the simulated device's process list, judges its windows
// submission-bound, counts the GPU's idle time under that cause with
// dcgm-exporter's labels, and serves its ring as a recording gpufeed
// report judges alike.
func TestAgentLaunchBoundScenario(t *testing.T) {
	livetest.Need(t)
	run := startScenario(t, "submission-bound")
	src, err := sim.Dial(run.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := testConfig(t)
	cfg.GPU, cfg.GPUName = src, src.Name()
	a, srv := startAgent(t, cfg)
	j := waitWindows(t, a, run.PID, 3, 60*time.Second)

	j.mu.Lock()
	verdict := j.verdict
	j.mu.Unlock()
	if verdict.Class != finding.SubmissionBound {
		t.Errorf("last window's verdict %s (%s), want %s", verdict.Class, verdict.Missing, finding.SubmissionBound)
	}
	labels := map[string]string{"Hostname": "node-a", "gpu": "0", "UUID": "GPU-SIM-0", "pid": strconv.Itoa(run.PID), "comm": "python3"}
	starved := series(t, a, "gpufeed_gpu_starved_seconds_total", labels)
	byCause := map[string]float64{}
	for _, m := range starved {
		for _, l := range m.GetLabel() {
			if l.GetName() == "cause" {
				byCause[l.GetValue()] = value(m)
			}
		}
	}
	obs := series(t, a, "gpufeed_gpu_observed_seconds_total", labels)
	if len(obs) != 1 || value(obs[0]) < 6 {
		t.Fatalf("observed seconds %v, want one series of at least two windows' time", obs)
	}
	sub := byCause[string(finding.SubmissionBound)]
	if sub <= 0 || sub > value(obs[0]) {
		t.Errorf("starved seconds by cause %v over %.1f s observed: want submission-bound the largest, within the observed time", byCause, value(obs[0]))
	}
	for c, v := range byCause {
		if c != string(finding.SubmissionBound) && v >= sub {
			t.Errorf("cause %s %.1f s >= submission-bound %.1f s", c, v, sub)
		}
	}
	if info := series(t, a, "gpufeed_job_verdict_info", labels); len(info) != 1 {
		t.Errorf("verdict info series %v, want exactly one", info)
	}
	if rq := series(t, a, "gpufeed_launch_thread_runqueue_wait_seconds_total", labels); len(rq) != 1 {
		t.Errorf("run-queue wait series %v, want one", rq)
	}
	if problems, err := testutil.CollectAndLint(a); err != nil || len(problems) > 0 {
		t.Errorf("exposition lint: %v %v", err, problems)
	}

	// The ring as a recording: it decodes, covers the windows kept, and
	// judges as the windows did.
	code, body := get(t, srv.URL+"/recording?pid="+strconv.Itoa(run.PID))
	if code != http.StatusOK {
		t.Fatalf("/recording: %d %s", code, body)
	}
	tl, warns, err := timeline.Decode(strings.NewReader(body), "recording")
	if err != nil || len(warns) > 0 {
		t.Fatalf("recording does not decode: %v %v", err, warns)
	}
	if secs := float64(tl.Ticks[len(tl.Ticks)-1].T-tl.Ticks[0].T) / 1e9; secs < 8 {
		t.Errorf("recording covers %.1f s, want the ring's windows (at least 8 s)", secs)
	}
	if rep := diagnose.Judge(tl, nil); rep.Verdict.Class != finding.SubmissionBound {
		t.Errorf("recording judged %s, want %s", rep.Verdict.Class, finding.SubmissionBound)
	}
	code, body = get(t, srv.URL+"/report?pid="+strconv.Itoa(run.PID))
	if code != http.StatusOK || !strings.Contains(body, "VERDICT: submission-bound") {
		t.Errorf("/report: %d\n%s", code, body)
	}
	code, body = get(t, srv.URL+"/")
	if code != http.StatusOK || !strings.Contains(body, strconv.Itoa(run.PID)) {
		t.Errorf("/: %d\n%s", code, body)
	}
	if code, body = get(t, srv.URL+"/pids"); code != http.StatusOK || body != strconv.Itoa(run.PID)+"\n" {
		t.Errorf("/pids: %d %q, want the job's pid", code, body)
	}
	if code, body = get(t, srv.URL+"/pids?slurm_job_id=4242"); code != http.StatusOK || body != "" {
		t.Errorf("/pids of another Slurm job: %d %q, want none", code, body)
	}
	for q, want := range map[string]int{"pid=x": http.StatusBadRequest, "pid=1": http.StatusNotFound} {
		if code, body := get(t, srv.URL+"/report?"+q); code != want {
			t.Errorf("/report?%s: %d %q, want %d", q, code, body, want)
		}
	}
}

// TestAgentCountsOOMKilledMemberOnce: rank 2 of a real three-rank job is
// OOM-killed in its memory cgroup while the agent watches the job (named
// by pid: these ranks use no GPU); the kernel log's kill is a member
// death, counted once however many windows read it again.
func TestAgentCountsOOMKilledMemberOnce(t *testing.T) {
	livetest.Need(t)
	light(t)
	ctx := context.Background()
	o, err := testjob.StartRanks(ctx, 2, 150)
	if err != nil {
		t.Skipf("the ranks workload cannot run here: %v", err)
	}
	defer o.Stop()
	cfg := testConfig(t)
	cfg.PIDs = []int{o.PID}
	a, _ := startAgent(t, cfg)
	if err := o.AwaitKill(ctx); err != nil {
		t.Fatal(err)
	}
	j := waitWindows(t, a, o.PID, 1, 30*time.Second)
	first := j.windows
	waitWindows(t, a, o.PID, first+2, 30*time.Second)
	deaths := series(t, a, "gpufeed_member_deaths_total", map[string]string{"pid": strconv.Itoa(o.PID), "cause": "oom-kill"})
	if len(deaths) != 1 || value(deaths[0]) != 1 {
		t.Fatalf("member deaths %v, want one oom-kill counted once", deaths)
	}
}

// TestAgentProbeFailureKeepsScrape: with the kernel log unreadable, the
// end-of-window probe fails and says so, and the scrape still serves the
// job's metrics.
func TestAgentProbeFailureKeepsScrape(t *testing.T) {
	livetest.Need(t)
	light(t)
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sleep.Process.Kill(); _ = sleep.Wait() }()
	cfg := testConfig(t)
	cfg.PIDs = []int{sleep.Process.Pid}
	cfg.Kmsg = kernlog.Reader{Path: t.TempDir() + "/no-kmsg", NoFallback: true}
	a, srv := startAgent(t, cfg)
	waitWindows(t, a, sleep.Process.Pid, 1, 30*time.Second)
	code, body := get(t, srv.URL+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{`gpufeed_probe_success{probe="end-of-window"} 0`, `gpufeed_probe_success{probe="sample"} 1`,
		`gpufeed_job_verdict_info{`, `gpufeed_probe_failures_total{probe="end-of-window"}`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !strings.Contains(body, `verdict="idle"`) {
		t.Errorf("sleep 60 not judged idle:\n%s", grepLines(body, "verdict_info"))
	}
	// The platform checks' subjects are identifiers in the labels (paths,
	// PCI addresses), never the report's sentences: the node's /dev/shm
	// check, run in the agent's own process, names its /dev/shm by path.
	checks := grepLines(body, "gpufeed_platform_check_status{")
	if !regexp.MustCompile(`check="dev-shm",status="[a-z-]+",subject="/proc/self/root/dev/shm"`).MatchString(checks) {
		t.Errorf("/metrics lacks the dev-shm check's subject as a path:\n%s", checks)
	}
	for _, m := range regexp.MustCompile(`subject="([^"]*)"`).FindAllStringSubmatch(checks, -1) {
		if strings.ContainsAny(m[1], " ()'") {
			t.Errorf("platform check subject %q is not an identifier:\n%s", m[1], checks)
		}
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestAgentMetricsLabelsAreSafe: a job's name comes from the job (its
// executable's name, or what it set with prctl). Prometheus's text format
// escapes only backslash, quote and newline in label values, so a
// right-to-left override or an escape sequence in it would reach the
// terminal of whoever reads /metrics with curl, and a dashboard's legend:
// it is written with '?' instead, as every other output writes it. (The
// Slurm job id, pod UID and container id are read only when they are
// digits or hex.)
func TestAgentMetricsLabelsAreSafe(t *testing.T) {
	livetest.Need(t)
	light(t)
	dir := t.TempDir()
	exe := filepath.Join(dir, "A\u202eB\x1b[31m\u2028")
	b, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Skip("no /bin/sleep to copy")
	}
	if err := os.WriteFile(exe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	var job *exec.Cmd
	if err := livetest.WhileTextBusy(func() error {
		job = exec.Command(exe, "60")
		job.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		return job.Start()
	}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = job.Process.Kill(); _ = job.Wait() }()
	cfg := testConfig(t)
	cfg.PIDs = []int{job.Process.Pid}
	a, srv := startAgent(t, cfg)
	waitWindows(t, a, job.Process.Pid, 1, 30*time.Second)
	_, body := get(t, srv.URL+"/metrics")
	for _, bad := range []string{"\u202e", "\x1b", "\u2028", "\x07"} {
		if strings.Contains(body, bad) {
			t.Errorf("/metrics holds %q:\n%s", bad, grepLines(body, "verdict_info"))
		}
	}
	for _, want := range []string{`comm="A?B?[31m?"`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(body, "verdict_info"))
		}
	}
}

// TestAgentExportsWorkerCopies: a job whose two forked workers walked a
// list of Python floats held by their parent (copy-on-write), then hold
// their copies; the agent, watching it by pid, exports what they copied as
// smaps gives it (the workers' Private_Dirty in the mappings they share
// with the parent, the figure gpufeed diagnose's tests check independently).
func TestAgentExportsWorkerCopies(t *testing.T) {
	livetest.Need(t)
	light(t) // copies held are memory: the workers walk 2 s, then sleep
	r, err := testjob.Start(t.Context(), testjob.COW, nil, "--storage", "objects", "--workers", "2", "--items", "1500000", "--seconds", "2")
	if err != nil {
		t.Skipf("the copy-on-write workload cannot run here: %v", err)
	}
	defer r.Stop()
	m, err := r.Await(t.Context(), "workers", 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	workers := m.Ints("workers")
	for range workers {
		if _, err := r.Await(t.Context(), "walked", 60*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig(t)
	cfg.PIDs = []int{r.PID}
	a, _ := startAgent(t, cfg)
	waitWindows(t, a, r.PID, 2, 60*time.Second)
	got := series(t, a, "gpufeed_worker_cow_copied_bytes", map[string]string{"pid": strconv.Itoa(r.PID)})
	if len(got) != 1 {
		t.Fatalf("copied-bytes series %v, want one", got)
	}
	fs := cfg.FS
	parent, err := fs.AnonMappings(r.PID)
	if err != nil {
		t.Fatal(err)
	}
	want := 0.0
	for _, w := range workers {
		maps, err := fs.AnonMappings(w)
		if err != nil {
			t.Fatal(err)
		}
		want += float64(procfs.MatchInherited(parent, maps).Copied)
	}
	if v := value(got[0]); want < 8<<20 || v < 0.9*want || v > 1.1*want {
		t.Errorf("gpufeed_worker_cow_copied_bytes %.1f MiB, smaps says %.1f MiB", v/(1<<20), want/(1<<20))
	}
}

// TestAgentExportsRankStraggler: a real 2-rank torch.distributed (gloo)
// job whose rank 1 spends 150 ms of its own CPU before each all_reduce
// while rank 0 waits in it; the agent, watching the launcher by pid, names
// rank 1 (and its pid) as the straggler, with rank 0's wait as the value.
func TestAgentExportsRankStraggler(t *testing.T) {
	livetest.Need(t)
	r, err := testjob.Start(t.Context(), testjob.TorchRanks, nil, "--world", "2", "--slow", "1", "--pause", "0", "--rounds", "5")
	if err != nil {
		t.Skipf("the torch.distributed workload cannot run here: %v", err)
	}
	defer r.Stop()
	m, err := r.Await(t.Context(), "ranks", 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pids := m.IntMap("ranks")
	if _, err := r.Await(t.Context(), "rounds-done", 120*time.Second); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.PIDs = []int{r.PID}
	a, _ := startAgent(t, cfg)
	waitWindows(t, a, r.PID, 2, 60*time.Second)
	got := series(t, a, "gpufeed_rank_straggler", map[string]string{"pid": strconv.Itoa(r.PID)})
	if len(got) != 1 {
		t.Fatalf("straggler series %v, want one", got)
	}
	labels := map[string]string{}
	for _, l := range got[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["rank"] != "1" || labels["rank_pid"] != strconv.Itoa(pids["1"]) {
		t.Errorf("straggler labels %v, want rank 1, rank_pid %d", labels, pids["1"])
	}
	if v := value(got[0]); v < 0.5 || v > 1 {
		t.Errorf("rank 0 waited %.2f of the window for rank 1, want most of it", v)
	}
}
