package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/demo"
	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// gpufeed agent against a real Prometheus server (Debian's prometheus
// package, which make test installs): agents watch a starved job (the
// submission-bound scenario), a stalled one, a healthy one (gpu-bound) and a
// job one of whose ranks the kernel OOM-kills; Prometheus scrapes them and
// evaluates the shipped alert rules, with their durations shortened in a
// copy (the expressions are the shipped ones). Each alert must fire for
// its scenario and for no other, and never for the healthy job.

const shippedRules = "../../deploy/prometheus/alerts.yml"

// shippedRulesTests holds promtool's unit tests of the shipped rules.
const shippedRulesTests = "../../deploy/prometheus/alerts_test.yml"

// shortRules is the shipped rule file with its time scales cut to fit a
// test: the rate windows and the durations an alert must hold.
func shortRules(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(shippedRules)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, r := range []struct{ from, to string }{{"[5m]", "[15s]"}, {"[10m]", "[60s]"}, {"offset 10m", "offset 60s"}, {"for: 5m", "for: 5s"}, {"for: 10m", "for: 10s"}, {"for: 15m", "for: 15s"}} {
		if !strings.Contains(s, r.from) {
			t.Fatalf("%s holds no %q: the test's copy would not shorten it", shippedRules, r.from)
		}
		s = strings.ReplaceAll(s, r.from, r.to)
	}
	p := filepath.Join(t.TempDir(), "alerts-short.yml")
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (Debian's prometheus package provides it; make test installs it)", name)
	}
	return p
}

func TestShippedRulesPassPromtool(t *testing.T) {
	promtool := needTool(t, "promtool")
	for _, f := range []string{shippedRules, shortRules(t)} {
		out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput()
		if err != nil {
			t.Errorf("promtool check rules %s: %v\n%s", f, err, out)
		}
	}
	// The unit tests beside the rules: each alert fires for its series
	// and stays quiet for the nearby ones that are not its case.
	cmd := exec.Command(promtool, "test", "rules", filepath.Base(shippedRulesTests))
	cmd.Dir = filepath.Dir(shippedRulesTests)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules %s: %v\n%s", shippedRulesTests, err, out)
	}
	rules, err := os.ReadFile(shippedRules)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(shippedRulesTests)
	if err != nil {
		t.Fatal(err)
	}
	// Older alerts without a unit test yet: the first three fire in a real
	// Prometheus in TestAgentAlertsInRealPrometheus; the probe alert is
	// checked by promtool check rules only. Every new alert needs one.
	older := map[string]bool{"GPUFeedGPUStarved": true, "GPUFeedJobStalled": true, "GPUFeedMemberDied": true, "GPUFeedProbeFailing": true}
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(rules), -1) {
		if !older[m[1]] && !regexp.MustCompile(`(?m)^\s*alertname: `+regexp.QuoteMeta(m[1])+`\s*$`).Match(tests) {
			t.Errorf("alert %s of %s has no unit test in %s", m[1], shippedRules, shippedRulesTests)
		}
	}
}

// agentProc is a running gpufeed agent.
type agentProc struct {
	addr   string
	pid    int
	mu     sync.Mutex
	stderr strings.Builder
}

func (a *agentProc) log() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stderr.String()
}

var listeningRe = regexp.MustCompile(`msg="gpufeed agent listening" address=(\S+)`)

// startAgentProc runs gpufeed agent with a short window on a free
// loopback port and returns once it serves.
func startAgentProc(t *testing.T, hostname string, args ...string) *agentProc {
	t.Helper()
	args = append([]string{"agent", "--listen", "127.0.0.1:0", "--hostname", hostname, "--interval", "100ms",
		"--slow-every", "500ms", "--window", "3s", "--ring", "30s", "--discover-every", "500ms"}, args...)
	cmd := exec.Command(gpufeed(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	errp, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	a := &agentProc{pid: cmd.Process.Pid}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(errp)
		for sc.Scan() {
			line := sc.Text()
			a.mu.Lock()
			a.stderr.WriteString(line + "\n")
			a.mu.Unlock()
			if m := listeningRe.FindStringSubmatch(line); m != nil {
				addr <- m[1]
			}
		}
	}()
	select {
	case a.addr = <-addr:
	case <-time.After(30 * time.Second):
		t.Fatalf("gpufeed %v did not listen:\n%s", args, a.log())
	}
	return a
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startPrometheus runs a Prometheus server on loopback scraping targets
// every second and evaluating rules every second.
func startPrometheus(t *testing.T, rules string, targets []string) string {
	t.Helper()
	bin := needTool(t, "prometheus")
	dir := t.TempDir()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	conf := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: gpufeed
    static_configs:
      - targets: [%s]
`, rules, strings.Join(quoted, ", "))
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	var out strings.Builder
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := "http://" + addr
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(base + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 60 s:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

// query runs an instant query through Prometheus's HTTP API.
func query(t *testing.T, base, q string) []promSample {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []promSample `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	if r.Status != "success" {
		t.Fatalf("query %s: %s", q, r.Error)
	}
	return r.Data.Result
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestAgentAlertsInRealPrometheus(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	promtool := needTool(t, "promtool")
	needTool(t, "prometheus")
	exe := gpufeed(t)
	ctx := context.Background()
	start := func(name string) *demo.Run {
		sc, err := demo.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		run, err := demo.Start(ctx, sc, demo.Options{Exe: exe, WorkloadArgs: []string{demo.WorkloadCommand},
			Lifetime: 4 * time.Minute, TempDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(run.Stop)
		return run
	}
	// The healthy job is the GPU-bound loop with blocking synchronisation:
	// its host thread sleeps in the synchronise (the spinning one, the
	// default scenario's, takes a CPU for the whole test).
	starved, stalled, healthy := start("submission-bound"), start("stalled"), start("gpu-bound-sync")
	// Rank 2 allocates after 1,200 rounds (about 12 s): killed while
	// Prometheus scrapes its agent (the rule also catches a death counted
	// before the first scrape).
	ranks, err := testjob.StartRanks(ctx, 2, 1200)
	if err != nil {
		t.Fatalf("the ranks workload: %v", err)
	}
	t.Cleanup(func() { _ = ranks.Stop() })

	agents := map[string]*agentProc{
		"starved": startAgentProc(t, "node-starved", "--device", "sim:"+starved.Socket),
		"stalled": startAgentProc(t, "node-stalled", "--device", "sim:"+stalled.Socket),
		"healthy": startAgentProc(t, "node-healthy", "--device", "sim:"+healthy.Socket),
		"died":    startAgentProc(t, "node-died", "--device", "none", "--pid", strconv.Itoa(ranks.PID)),
	}
	pids := map[string]string{"starved": strconv.Itoa(starved.PID), "stalled": strconv.Itoa(stalled.PID),
		"healthy": strconv.Itoa(healthy.PID), "died": strconv.Itoa(ranks.PID)}
	byPID := map[string]string{}
	var targets []string
	for name, a := range agents {
		byPID[pids[name]] = name
		targets = append(targets, a.addr)
	}
	promStarted := time.Now()
	base := startPrometheus(t, shortRules(t), targets)

	// The ranks job is stalled too once its rank died: its peers block in
	// read for good, waiting for the dead one.
	want := map[string]map[string]bool{"GPUFeedGPUStarved": {"starved": true}, "GPUFeedJobStalled": {"stalled": true, "died": true},
		"GPUFeedMemberDied": {"died": true}}
	fired := map[string]map[string]bool{}
	wrong := map[string]bool{}
	// The starved job's launch loop and its simulated device take most of
	// two CPUs, beside the other light tests: once its alert has fired and
	// its verdict's labels are checked, it is stopped (its agent stays
	// scraped, and an alert for the ended job would still be wrong).
	starvedChecked := false
	checkStarved := func() {
		// The metrics arrived with dcgm-exporter's labels and the job's.
		info := query(t, base, `gpufeed_job_verdict_info{pid="`+pids["starved"]+`"}`)
		if len(info) != 1 {
			t.Fatalf("verdict info for the starved job: %v", info)
		}
		for k, v := range map[string]string{"Hostname": "node-starved", "gpu": "0", "UUID": "GPU-SIM-0", "comm": "python3",
			"verdict": "submission-bound", "job": "gpufeed", "instance": agents["starved"].addr} {
			if got := info[0].Metric[k]; got != v {
				t.Errorf("verdict info label %s=%q, want %q (%v)", k, got, v, info[0].Metric)
			}
		}
		starved.Stop()
	}
	// After every alert due has fired, watch 15 s more (five windows):
	// the healthy job must stay quiet meanwhile too.
	deadline := time.Now().Add(3 * time.Minute)
	var allAt time.Time
	for {
		for _, s := range query(t, base, `ALERTS{alertname=~"GPUFeed.*"}`) {
			name, who := s.Metric["alertname"], byPID[s.Metric["pid"]]
			if want[name] == nil {
				continue // the agent's own health
			}
			if !want[name][who] {
				wrong[fmt.Sprintf("%s %s for the %s job (pid %s, labels %v)", name, s.Metric["alertstate"], who, s.Metric["pid"], s.Metric)] = true
			}
			if s.Metric["alertstate"] == "firing" {
				if fired[name] == nil {
					fired[name] = map[string]bool{}
				}
				if !fired[name][who] {
					t.Logf("%s firing for the %s job %s after Prometheus started", name, who, time.Since(promStarted).Round(time.Second))
				}
				fired[name][who] = true
			}
		}
		if fired["GPUFeedGPUStarved"]["starved"] && !starvedChecked {
			starvedChecked = true
			checkStarved()
		}
		all := true
		for name, whos := range want {
			for who := range whos {
				all = all && fired[name][who]
			}
		}
		if all && allAt.IsZero() {
			allAt = time.Now()
		}
		if all && time.Since(allAt) > 15*time.Second || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	for w := range wrong {
		t.Errorf("alert where none is due: %s", w)
	}
	for name, whos := range want {
		for who := range whos {
			if !fired[name][who] {
				t.Errorf("%s never fired for the %s job (pid %s)", name, who, pids[who])
			}
		}
	}
	if t.Failed() {
		for name, a := range agents {
			t.Logf("agent %s:\n%s", name, tail(a.log(), 3000))
		}
		for _, s := range query(t, base, `gpufeed_job_verdict_info or rate(gpufeed_gpu_starved_seconds_total[15s])`) {
			t.Logf("%v %v", s.Metric, s.Value)
		}
	}

	if up := query(t, base, `sum(up{job="gpufeed"})`); len(up) != 1 || up[0].Value[1] != "4" {
		t.Errorf("targets up: %v, want 4", up)
	}

	// The exposition passes promtool's checks.
	for name, a := range agents {
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = strings.NewReader(scrape(t, a.addr))
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool check metrics on the %s agent: %v\n%s", name, err, out)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
