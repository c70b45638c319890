package agent

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/livetest"
)

// The agent's detail (a job's command line, allowlisted environment and
// kernel log lines) is served on TCP only to authenticated clients, and on
// the Unix socket to each client as its uid may read it.

const nobody = 65534

// startSleep starts `sleep 120` as uid (0: as the test), with env added.
func startSleep(t *testing.T, uid uint32, env ...string) int {
	t.Helper()
	c := exec.Command("sleep", "120")
	c.Env = append(os.Environ(), env...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if uid != 0 {
		c.SysProcAttr.Credential = &syscall.Credential{Uid: uid, Gid: uid}
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return c.Process.Pid
}

// serveUnix serves h on a Unix socket any local user may connect to.
func serveUnix(t *testing.T, a *Agent, h http.Handler) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755) // the unprivileged client must reach the socket
	}
	path := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	lim := LimitConnections(l, 8)
	a.CountConnections("unix", lim)
	srv := NewServer(h)
	go func() { _ = srv.Serve(lim) }()
	t.Cleanup(func() { _ = srv.Close() })
	return path
}

// curlAs fetches path on the socket as uid, from a process of its own
// (the kernel gives the agent that process's credentials).
func curlAs(t *testing.T, uid uint32, sock, path string) (int, string) {
	t.Helper()
	c := exec.Command("curl", "-sS", "--max-time", "20", "-w", "\n%{http_code}", "--unix-socket", sock, "http://agent"+path)
	if uid != 0 {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
	}
	out, err := c.Output()
	if err != nil {
		t.Fatalf("curl %s as uid %d: %v\n%s", path, uid, err, out)
	}
	s := string(out)
	i := strings.LastIndexByte(s, '\n')
	code, _ := strconv.Atoi(s[i+1:])
	return code, s[:i]
}

// TestAgentDetailSocketAnswersEachUserAsTheKernelWould: through the agent
// (root, CAP_SYSLOG), an unprivileged client reads neither a root job's
// details (its allowlisted environment, its command line) nor kernel log
// lines the kernel would not show it (kernel.dmesg_restrict=1): a
// segfault line with its instruction pointer would give away the
// process's address space layout. Its own job it reads, without them.
func TestAgentDetailSocketAnswersEachUserAsTheKernelWould(t *testing.T) {
	livetest.Need(t)
	light(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: jobs of two users, and a client of each")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	restricted, _ := os.ReadFile("/proc/sys/kernel/dmesg_restrict")
	rootJob := startSleep(t, 0, "SLURM_JOB_ID=424242")
	userJob := startSleep(t, nobody)
	// A kernel-log line older than the process holding its pid is left
	// out (it was an earlier process's); the kernel log's clock and a
	// process's start time (in 10 ms ticks) are read from different
	// clocks, so a line written within milliseconds of the start can read
	// as older. A real segfault comes later: so does this one.
	time.Sleep(time.Second)
	// A segfault line naming the unprivileged job's pid, as the kernel
	// writes one (with an instruction pointer and a library's base).
	const ip = "00007f3b1c2d3e4f"
	line := fmt.Sprintf("<6>sleep[%d]: segfault at 10 ip %s sp 00007ffd2a1b0c80 error 4 in libc.so.6[7f3b1c200000+195000]\n", userJob, ip)
	if err := os.WriteFile("/dev/kmsg", []byte(line), 0); err != nil {
		t.Skipf("cannot write the kernel log: %v", err)
	}
	cfg := testConfig(t)
	cfg.PIDs = []int{rootJob, userJob}
	a, _ := startAgent(t, cfg)
	waitWindows(t, a, rootJob, 1, 60*time.Second)
	waitWindows(t, a, userJob, 1, 60*time.Second)
	sock := serveUnix(t, a, a.Handler(a.Registry()))

	// Root reads everything: the environment's job id, the kernel line.
	code, body := curlAs(t, 0, sock, "/report?format=json&pid="+strconv.Itoa(rootJob))
	if code != http.StatusOK || !strings.Contains(body, "424242") {
		t.Fatalf("root's /report of its job: %d, want 200 with the Slurm job id:\n%.2000s", code, body)
	}
	// The line reaches the report with the window that read the kernel
	// log after it was written: on a slow host (the race detector) that
	// can be the next window, so root asks again for up to 30 s.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		code, body = curlAs(t, 0, sock, "/report?format=json&pid="+strconv.Itoa(userJob))
		if code != http.StatusOK || strings.Contains(body, ip) || time.Now().After(deadline) {
			break
		}
	}
	if code != http.StatusOK || !strings.Contains(body, ip) {
		t.Fatalf("root's /report of nobody's job: %d, want 200 with the segfault line:\n%.3000s", code, body)
	}

	// nobody: not root's job, in any form.
	for _, p := range []string{"/report?pid=", "/report?format=json&pid=", "/recording?pid="} {
		code, body := curlAs(t, nobody, sock, p+strconv.Itoa(rootJob))
		if code != http.StatusForbidden || strings.Contains(body, "424242") {
			t.Errorf("nobody's %s(root's job): %d, want 403 without its environment:\n%.500s", p, code, body)
		}
	}
	// Its own job, without the kernel log's line where dmesg_restrict
	// keeps the kernel log from it.
	code, body = curlAs(t, nobody, sock, "/report?format=json&pid="+strconv.Itoa(userJob))
	if code != http.StatusOK {
		t.Fatalf("nobody's /report of its own job: %d\n%.500s", code, body)
	}
	if strings.TrimSpace(string(restricted)) == "1" {
		if strings.Contains(body, ip) || strings.Contains(body, "segfault at") {
			t.Errorf("nobody read a kernel line although kernel.dmesg_restrict=1:\n%.3000s", body)
		}
		if !strings.Contains(body, "lacks CAP_SYSLOG") {
			t.Errorf("nobody's report does not say the kernel log was left out:\n%.3000s", body)
		}
		code, rec := curlAs(t, nobody, sock, "/recording?pid="+strconv.Itoa(userJob))
		if code != http.StatusOK || strings.Contains(rec, ip) {
			t.Errorf("nobody's /recording of its own job: %d, holding the kernel line: %v", code, strings.Contains(rec, ip))
		}
	}
	// The unauthenticated TCP listener serves no detail at all.
	srv := NewServer(a.MetricsHandler(a.Registry()))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	for _, p := range []string{"/report?pid=", "/recording?pid="} {
		if code, body := get(t, "http://"+l.Addr().String()+p+strconv.Itoa(rootJob)); code != http.StatusForbidden || strings.Contains(body, "424242") {
			t.Errorf("TCP %s: %d, want 403:\n%.300s", p, code, body)
		}
	}
	if code, _ := get(t, "http://"+l.Addr().String()+"/metrics"); code != http.StatusOK {
		t.Errorf("TCP /metrics: %d", code)
	}
}
