package agent

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
	"github.com/gpufeed/gpufeed/internal/testjob"
)

// TestAgentNamesPods: two real processes in real memory cgroups laid out
// as the kubelet's cgroupfs driver lays out pods
// (.../kubepods-.../pod<UID>/<container ID>). The first container has a
// containerd record on the node (an OCI config with the kubelet's
// annotations, under --host-root); the second has none but the downward
// API's POD_NAME and POD_NAMESPACE in its environment. The agent's labels
// carry each one's names, and / says which part of a pod is known by its
// UID only.
func TestAgentNamesPods(t *testing.T) {
	livetest.Need(t)
	light(t)
	top, err := testjob.NewMemoryCgroup("kubepods-gpufeed-"+strconv.Itoa(os.Getpid()), 1<<30)
	if errors.Is(err, testjob.ErrUnavailable) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer top.Remove()
	host := t.TempDir()
	type pod struct {
		uid, cid string
		env      []string
		record   bool
		want     map[string]string
	}
	pods := []pod{
		{"4c5d1a2b-0000-4111-8222-0123456789ab", strings.Repeat("3f1c0a9e", 8), nil, true,
			map[string]string{"namespace": "ml-research", "pod": "train-llm-0", "container": "trainer"}},
		{"5e6f7a8b-1111-4222-8333-444455556666", strings.Repeat("aa1c0a9e", 8), []string{"POD_NAME=batch-b-0", "POD_NAMESPACE=team-b"}, false,
			map[string]string{"namespace": "team-b", "pod": "batch-b-0", "container": ""}},
	}
	cfg := testConfig(t)
	cfg.HostRoot = host
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()
	var pids []int
	for _, p := range pods {
		podDir := filepath.Join(top.Dir, "pod"+p.uid)
		ctrDir := filepath.Join(podDir, p.cid)
		for _, d := range []string{podDir, ctrDir} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			cleanups = append(cleanups, func() { _ = os.Remove(d) })
		}
		if p.record {
			dir := filepath.Join(host, "run/containerd/io.containerd.runtime.v2.task/k8s.io", p.cid)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			rec := `{"ociVersion":"1.1.0","process":{"env":["SECRET_TOKEN=never-read"]},"annotations":{` +
				`"io.kubernetes.cri.sandbox-name":"train-llm-0","io.kubernetes.cri.sandbox-namespace":"ml-research",` +
				`"io.kubernetes.cri.container-name":"trainer","io.kubernetes.cri.sandbox-uid":"` + p.uid + `"}}`
			if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(rec), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("sleep", "120")
		cmd.Env = append(os.Environ(), p.env...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cleanups = append(cleanups, func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if err := os.WriteFile(filepath.Join(ctrDir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, cmd.Process.Pid)
	}
	cfg.PIDs = pids
	a, srv := startAgent(t, cfg)
	for i, p := range pods {
		waitWindows(t, a, pids[i], 1, 30*time.Second)
		want := map[string]string{"pid": strconv.Itoa(pids[i]), "pod_uid": p.uid, "container_id": p.cid}
		for k, v := range p.want {
			want[k] = v
		}
		if s := series(t, a, "gpufeed_job_windows_total", want); len(s) != 1 {
			got := series(t, a, "gpufeed_job_windows_total", map[string]string{"pid": strconv.Itoa(pids[i])})
			t.Errorf("pod %s: no series labelled %v; have %v", p.uid, want, got)
		}
	}
	_, page := get(t, srv.URL+"/")
	if !strings.Contains(page, "ml-research/train-llm-0/trainer") || !strings.Contains(page, "team-b/batch-b-0/?") {
		t.Errorf("/ does not name the pods (? for a part known by UID only):\n%s", page)
	}
	if strings.Contains(page, "never-read") {
		t.Error("a value of the container's environment was read")
	}
}
