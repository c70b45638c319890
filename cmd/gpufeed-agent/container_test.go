package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/demo"
	"github.com/gpufeed/gpufeed/internal/livetest"
)

func TestMain(m *testing.M) { os.Exit(clitest.Main(m)) }

// The node agent's image, run as the DaemonSet runs it: `make image`
// (scripts/image.sh) builds it from this tree; the container shares the
// host's PID namespace (hostPID), mounts the host's /sys read-only under
// /host, has a read-only root and every capability dropped
// but SYS_PTRACE, DAC_READ_SEARCH and SYSLOG, and takes the DaemonSet's arguments. A
// starved job runs on the host on the simulated GPU (its socket mounted
// into the container: the node's NVML in a cluster); a real Prometheus
// scrapes the agent and must see the job's series with their labels, then
// see them go once the job ended and its ring aged out.
//
// It needs podman (or a docker daemon): make test installs podman, runc
// and debootstrap; where none can be had it skips and says so. The first
// run makes the Debian base images (debootstrap, some minutes); later runs
// reuse them and the build cache.

// daemonSetArgs are deploy/kubernetes/daemonset.yaml's arguments but
// --listen (the pod's address there); deploy/validate holds the manifest
// to the same list.
var daemonSetArgs = []string{"--hostname=test-node", "--sys-root=/host/sys", "--host-root=/host"}

func TestAgentContainer(t *testing.T) {
	livetest.Need(t)
	prometheus, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus is not installed (Debian's prometheus package provides it; make test installs it)")
	}
	if _, err := exec.LookPath("podman"); err != nil {
		if _, err := exec.LookPath("docker"); err != nil || exec.Command("docker", "info").Run() != nil {
			t.Skip("neither podman nor a running docker: the agent's image cannot be built here (make test installs podman, runc and debootstrap with apt-get as root or passwordless sudo)")
		}
	}
	script, err := filepath.Abs("../../scripts/image.sh")
	if err != nil {
		t.Fatal(err)
	}
	// The engine and the flags image.sh chose (podman: its own
	// configuration and the runc runtime).
	out, err := exec.Command(script, "--env").Output()
	if err != nil {
		t.Fatalf("%s --env: %v", script, err)
	}
	env := os.Environ()
	var engine string
	var runtimeFlags []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		switch k {
		case "ENGINE":
			engine = v
		case "RUNTIME":
			if v != "" && v != "''" {
				runtimeFlags = []string{"--runtime", v}
			}
		default:
			env = append(env, k+"="+v)
		}
	}
	image := "gpufeed-agent:container-test"
	built := time.Now()
	build := exec.Command(script)
	build.Env = append(env, "IMAGE="+image)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, tail(string(out), 4000))
	}
	t.Logf("make image: %s", time.Since(built).Round(time.Second))
	engineCmd := func(args ...string) *exec.Cmd {
		c := exec.Command(engine, args...)
		c.Env = env
		return c
	}
	// The bases and the build cache stay for the next run; the image goes.
	t.Cleanup(func() { _ = engineCmd("image", "rm", image).Run() })
	if out, err := engineCmd("image", "inspect", "--format", "{{.Size}}", image).Output(); err == nil {
		t.Logf("image %s: %s bytes", image, strings.TrimSpace(string(out)))
	}

	ctx := context.Background()
	sc, err := demo.Lookup("submission-bound")
	if err != nil {
		t.Fatal(err)
	}
	job, err := demo.Start(ctx, sc, demo.Options{Exe: clitest.Build(t, "../gpufeed"), WorkloadArgs: []string{demo.WorkloadCommand},
		Lifetime: 4 * time.Minute, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(job.Stop)
	pid := strconv.Itoa(job.PID)

	// A job of another user (nobody), holding its Slurm job id in its
	// environment only: the agent reads it (the slurm_job_id label) only
	// when it can open another user's /proc/PID/environ, which needs
	// DAC_READ_SEARCH and SYS_PTRACE both.
	var other *exec.Cmd
	if os.Geteuid() == 0 {
		other = exec.Command("sleep", "300")
		other.Env = []string{"SLURM_JOB_ID=4242", "PATH=/usr/bin:/bin"}
		other.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })
	}

	addr := freePort(t)
	name := fmt.Sprintf("gpufeed-agent-test-%d", os.Getpid())
	sockDir := filepath.Dir(job.Socket)
	args := append([]string{"run", "--detach", "--rm", "--name", name}, runtimeFlags...)
	args = append(args,
		"--pid=host", "--network=host", "--read-only", "--cap-drop=ALL", "--cap-add=SYS_PTRACE,DAC_READ_SEARCH,SYSLOG",
		"--security-opt=no-new-privileges", "--user=0:0",
		// The node's /sys; no /dev/kmsg: the container's device cgroup
		// refuses to open it, and the agent reads the kernel log
		// through syslog(2) (dmesg in the image, CAP_SYSLOG).
		"--volume=/sys:/host/sys:ro",
		// The simulated GPU's socket: what NVML is to the node.
		"--volume="+sockDir+":"+sockDir+":ro",
		image, "--listen="+addr)
	args = append(args, daemonSetArgs...)
	args = append(args, "--device=sim:"+job.Socket, "--interval=100ms", "--slow-every=500ms", "--window=3s",
		"--ring=9s", "--discover-every=500ms")
	if other != nil {
		args = append(args, "--pid="+strconv.Itoa(other.Process.Pid))
	}
	if out, err := engineCmd(args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", engine, args, err, out)
	}
	logs := func() string {
		out, _ := engineCmd("logs", name).CombinedOutput()
		return string(out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("agent's log:\n%s", tail(logs(), 4000))
		}
		_ = engineCmd("rm", "--force", "--time=5", name).Run()
	})

	base := startPrometheus(t, prometheus, addr)
	waitFor := func(what string, limit time.Duration, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, limit)
			}
			time.Sleep(time.Second)
		}
	}
	var info []promSample
	waitFor("the job's verdict in Prometheus", 90*time.Second, func() bool {
		info = query(t, base, `gpufeed_job_verdict_info{pid="`+pid+`"}`)
		return len(info) == 1 && info[0].Metric["verdict"] == "submission-bound"
	})
	for k, v := range map[string]string{"Hostname": "test-node", "gpu": "0", "UUID": "GPU-SIM-0", "comm": "python3",
		"verdict": "submission-bound", "instance": addr} {
		if got := info[0].Metric[k]; got != v {
			t.Errorf("verdict info label %s=%q, want %q (%v)", k, got, v, info[0].Metric)
		}
	}
	if s := query(t, base, `gpufeed_gpu_starved_seconds_total{pid="`+pid+`",cause="submission-bound"} > 0`); len(s) != 1 {
		t.Errorf("starved seconds of the job: %v, want one series above 0", s)
	}
	if other != nil {
		opid := strconv.Itoa(other.Process.Pid)
		var w []promSample
		waitFor("the other user's job watched", 30*time.Second, func() bool {
			w = query(t, base, `gpufeed_job_watched{pid="`+opid+`"}`)
			return len(w) == 1
		})
		if got := w[0].Metric["slurm_job_id"]; got != "4242" {
			t.Errorf("the other user's job: slurm_job_id=%q, want 4242 from its environment (%v)", got, w[0].Metric)
		}
	}
	// What the container cannot read it says: the probes' state.
	for _, s := range query(t, base, `gpufeed_probe_success == 0`) {
		t.Errorf("probe %s fails in the container", s.Metric["probe"])
	}

	// The agent's cost in its container.
	if out, err := engineCmd("inspect", "--format", "{{.State.Pid}}", name).Output(); err == nil {
		if st, err := os.ReadFile("/proc/" + strings.TrimSpace(string(out)) + "/status"); err == nil {
			sc := bufio.NewScanner(strings.NewReader(string(st)))
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "VmRSS:") || strings.HasPrefix(sc.Text(), "VmHWM:") {
					t.Logf("agent in its container: %s", strings.Join(strings.Fields(sc.Text()), " "))
				}
			}
		}
	}

	// The job ends: it is no longer watched, then (its ring aged out) its
	// series are gone from the scrape and Prometheus marks them stale.
	job.Stop()
	waitFor("the ended job's watched gauge at 0", 30*time.Second, func() bool {
		s := query(t, base, `gpufeed_job_watched{pid="`+pid+`"}`)
		return len(s) == 1 && s[0].Value[1] == "0"
	})
	waitFor("the ended job's series gone", 60*time.Second, func() bool {
		return len(query(t, base, `{__name__=~"gpufeed_.+",pid="`+pid+`"}`)) == 0
	})
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

// startPrometheus runs a Prometheus server on loopback scraping target
// every second.
func startPrometheus(t *testing.T, bin, target string) string {
	t.Helper()
	dir := t.TempDir()
	conf := fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gpufeed\n    static_configs:\n      - targets: [%q]\n", target)
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

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
