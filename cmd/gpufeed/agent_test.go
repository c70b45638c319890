package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"

	"github.com/gpufeed/gpufeed/internal/agent"
	"github.com/gpufeed/gpufeed/internal/livetest"
)

// The agent's web configuration: the Prometheus exporters' file (TLS,
// basic authentication), loopback by default, and refused bad settings.

func TestAgentDefaultsToLoopback(t *testing.T) {
	out, _, code := run(t, "agent", "--help")
	if code != 0 || !strings.Contains(out, `--listen string`) || !strings.Contains(out, `"127.0.0.1:9847"`) {
		t.Errorf("agent --help (status %d) does not show the loopback default:\n%s", code, out)
	}
}

func TestAgentRefusesBadSettings(t *testing.T) {
	// Values it cannot use are usage (2); a device that does not answer is
	// a failure to do its work (3).
	for _, c := range []struct {
		args   []string
		want   string
		status int
	}{
		// A window no verdict can be given on is refused as diagnose
		// refuses it, with the rule and what would do.
		{[]string{"--window", "10s"}, "--window 10s holds 5 intervals of 2s; a verdict needs at least 20: give a shorter --interval (at most 500ms) or a longer --window (at least 40s)", 2},
		{[]string{"--window", "1s", "--interval", "10ms"}, "--window 1s: a verdict needs a window of at least 2s", 2},
		{[]string{"--interval", "0"}, "--interval 0s: want at least 10ms", 2},
		// Bare numbers are seconds, as for every gpufeed duration.
		{[]string{"--window", "3", "--interval", "1"}, "--window 3s holds 3 intervals of 1s", 2},
		{[]string{"--window", "abc"}, `--window wants a duration: seconds (5, 2.5) or with a unit (500ms, 30s, 2m); got "abc"`, 2},
		{[]string{"--ring", "NaN"}, `--ring wants a duration`, 2},
		{[]string{"--ring", "30s", "--window", "1m"}, "a ring of at least one window", 2},
		{[]string{"--web.config.file", "/nonexistent/web.yml"}, "--web.config.file /nonexistent/web.yml", 2},
		{[]string{"--device", "sim:" + filepath.Join(t.TempDir(), "none.sock")}, "none.sock", 3},
	} {
		_, stderr, code := run(t, append([]string{"agent", "--listen", "127.0.0.1:0"}, c.args...)...)
		if code != c.status || !strings.Contains(stderr, c.want) {
			t.Errorf("agent %v: status %d, stderr %q; want %d and %q", c.args, code, stderr, c.status, c.want)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gpufeed test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestAgentWebConfigTLSAndBasicAuth(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yml")
	conf := "tls_server_config:\n  cert_file: " + certFile + "\n  key_file: " + keyFile + "\nbasic_auth_users:\n  scraper: " + string(hash) + "\n"
	if err := os.WriteFile(web, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgentProc(t, "node-tls", "--device", "none", "--web.config.file", web)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(scheme, user, pass string, path ...string) (int, error) {
		p := "/metrics"
		if len(path) > 0 {
			p = path[0]
		}
		req, _ := http.NewRequest("GET", scheme+"://"+a.addr+p, nil)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get("https", "scraper", "s3cret"); err != nil || code != http.StatusOK {
		t.Errorf("https with the password: %d %v, want 200", code, err)
	}
	if code, err := get("https", "scraper", "wrong"); err != nil || code != http.StatusUnauthorized {
		t.Errorf("https with a wrong password: %d %v, want 401", code, err)
	}
	if code, err := get("https", "", ""); err != nil || code != http.StatusUnauthorized {
		t.Errorf("https without a password: %d %v, want 401", code, err)
	}
	// Every client authenticated: the details are served (no job: 404).
	if code, err := get("https", "scraper", "s3cret", "/report?pid=1"); err != nil || code != http.StatusNotFound {
		t.Errorf("/report with the password: %d %v, want 404 (served, no such job)", code, err)
	}
	if code, err := get("http", "scraper", "s3cret"); err == nil && code == http.StatusOK {
		t.Errorf("plain http served the metrics (status %d): TLS is not in force", code)
	}
}

// TestAgentWebConfigWithoutAuthServesNoDetail: TLS alone authenticates no
// client: /metrics is served, /report and /recording are not.
func TestAgentWebConfigWithoutAuthServesNoDetail(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	web := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(web, []byte("tls_server_config:\n  cert_file: "+certFile+"\n  key_file: "+keyFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := startAgentProc(t, "node-tls", "--device", "none", "--web.config.file", web)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	for path, want := range map[string]int{"/metrics": http.StatusOK, "/report?pid=1": http.StatusForbidden, "/recording?pid=1": http.StatusForbidden} {
		resp, err := client.Get("https://" + a.addr + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s over TLS without authentication: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestAgentSurvivesIdleConnectionFlood: 2,500 connections to the agent
// that send nothing, against an open-file limit of 1,024: the agent keeps
// its descriptors and memory bounded (connections past its cap are closed
// at once, the others once the header timeout passes), its discovery
// never fails, and the job it watches stays watched with its history.
func TestAgentSurvivesIdleConnectionFlood(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	job := exec.Command("sleep", "300")
	job.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = job.Process.Kill(); _ = job.Wait() }()
	pid := strconv.Itoa(job.Process.Pid)
	a := startAgentProc(t, "node-flood", "--device", "none", "--pid", pid)
	lim := unix.Rlimit{Cur: 1024, Max: 1024}
	if err := unix.Prlimit(a.pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		t.Fatal(err)
	}
	windowsRe := regexp.MustCompile(`gpufeed_job_windows_total\{[^}]*pid="` + pid + `"[^}]*\} (\d+)`)
	windows := func() int {
		m := windowsRe.FindStringSubmatch(scrape(t, a.addr))
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for windows() < 1 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	before := windows()
	if before < 1 {
		t.Fatalf("no window of the job judged before the flood:\n%s", a.log())
	}
	if resp, err := http.Get("http://" + a.addr + "/report?pid=" + pid); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("/report on the unauthenticated listener: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}

	// The flood, bounded in time: dialling stops after 20 s.
	const flood = 2500
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	stop := time.Now().Add(20 * time.Second)
	for len(conns) < flood && time.Now().Before(stop) {
		c, err := net.DialTimeout("tcp", a.addr, 2*time.Second)
		if err != nil {
			continue
		}
		conns = append(conns, c)
	}
	// Watch the agent's descriptors and memory while the connections
	// wait out the header timeout. The timeout runs from the agent's
	// accept, and on a loaded host the last connections dialled can wait
	// in the listen backlog for seconds first: each still open after 7 s
	// is read again until none is or 25 s have passed.
	stillOpen := func(cs []net.Conn) []net.Conn {
		var out []net.Conn
		for _, c := range cs {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			var b [1]byte
			if _, err := c.Read(b[:]); err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					out = append(out, c)
				}
			}
		}
		return out
	}
	peakFDs, peakRSS := 0, 0
	dialled := time.Now()
	open, openAt7 := conns, -1
	for time.Since(dialled) < 25*time.Second {
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", a.pid)); err == nil {
			peakFDs = max(peakFDs, len(fds))
		}
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.pid)); err == nil {
			if m := regexp.MustCompile(`VmRSS:\s+(\d+) kB`).FindSubmatch(st); m != nil {
				kb, _ := strconv.Atoi(string(m[1]))
				peakRSS = max(peakRSS, kb)
			}
		}
		if time.Since(dialled) >= 7*time.Second {
			if open = stillOpen(open); openAt7 < 0 {
				openAt7 = len(open)
			}
			if len(open) == 0 {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%d connections dialled; after 7 s %d still open, after %.1f s %d; agent's peak %d descriptors, %d MiB resident",
		len(conns), openAt7, time.Since(dialled).Seconds(), len(open), peakFDs, peakRSS>>10)
	if len(conns) < flood/2 {
		t.Fatalf("only %d connections could be dialled", len(conns))
	}
	if len(open) > 0 {
		t.Errorf("%d idle connections still open 25 s after the flood (the header timeout is %v)", len(open), agent.ReadHeaderTimeout)
	}
	if peakFDs > 512 {
		t.Errorf("the agent held up to %d descriptors (limit 1024)", peakFDs)
	}
	if peakRSS > 96<<10 {
		t.Errorf("the agent's resident memory reached %d MiB, past the DaemonSet's 96 MiB limit", peakRSS>>10)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	conns = nil

	// Discovery kept working; the job is the same one, still watched, and
	// judges windows on.
	deadline = time.Now().Add(30 * time.Second)
	for windows() <= before+1 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	m := scrape(t, a.addr)
	if after := windows(); after <= before+1 {
		t.Errorf("the job's windows went from %d to %d: not watched on", before, after)
	}
	for _, want := range []string{`gpufeed_probe_failures_total{probe="discover"} 0`, `gpufeed_job_watched{`, `gpufeed_http_connections_shed_total{listener="tcp"}`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if regexp.MustCompile(`gpufeed_job_watched\{[^}]*\} 0`).MatchString(m) {
		t.Errorf("the job is no longer watched:\n%s", regexp.MustCompile(`(?m)^gpufeed_job_watched.*$`).FindAllString(m, -1))
	}
	if log := a.log(); strings.Contains(log, "no longer watched") || strings.Contains(log, "too many open files") {
		t.Errorf("the agent dropped the job or ran out of descriptors:\n%s", tail(log, 3000))
	}
}

// TestAgentDetailSocket: --detail-socket serves the details on a Unix
// socket any local user may connect to, each client judged by its uid
// (root reads a root job, nobody does not), and is removed when the agent
// stops; a path holding another file is refused.
func TestAgentDetailSocket(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: a client of another uid")
	}
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("no curl")
	}
	job := exec.Command("sleep", "300")
	job.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = job.Process.Kill(); _ = job.Wait() }()
	pid := strconv.Itoa(job.Process.Pid)
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	sock := filepath.Join(dir, "agent.sock")
	a := startAgentProc(t, "node-sock", "--device", "none", "--pid", pid, "--detail-socket", sock)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o666 {
		t.Fatalf("socket %v %v: want a socket any user may connect to", fi, err)
	}
	fetch := func(uid uint32) (int, string) {
		c := exec.Command("curl", "-sS", "--max-time", "20", "-w", "\n%{http_code}", "--unix-socket", sock, "http://agent/report?pid="+pid)
		if uid != 0 {
			c.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		}
		out, err := c.Output()
		if err != nil {
			t.Fatalf("curl as %d: %v", uid, err)
		}
		s := string(out)
		i := strings.LastIndexByte(s, '\n')
		code, _ := strconv.Atoi(s[i+1:])
		return code, s[:i]
	}
	deadline := time.Now().Add(60 * time.Second)
	code, body := fetch(0)
	for (code == http.StatusServiceUnavailable || code == http.StatusNotFound) && time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		code, body = fetch(0)
	}
	if code != http.StatusOK || !strings.Contains(body, "VERDICT") {
		t.Fatalf("root's /report on the socket: %d\n%s\n%s", code, body, a.log())
	}
	if code, body := fetch(65534); code != http.StatusForbidden || strings.Contains(body, "VERDICT") {
		t.Errorf("nobody's /report of root's job on the socket: %d, want 403\n%s", code, body)
	}
	other := filepath.Join(dir, "file")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, "agent", "--listen", "127.0.0.1:0", "--device", "none", "--detail-socket", other); code != 3 || !strings.Contains(stderr, "is not a socket") {
		t.Errorf("--detail-socket on a file: status %d, %q", code, stderr)
	}
	if _, err := os.Stat(other); err != nil {
		t.Errorf("the file at --detail-socket was removed: %v", err)
	}
}

// TestAgentDetailsScrubCommandLineSecrets: a job whose command line holds a
// password flag and a URL with a password, watched by the agent: /report
// (text, verbose and JSON) and /recording (its bytes, as a client saves
// them) read on the detail socket hold neither secret, the JSON report and
// the recording the flag and the URL. The scrubbing happens where the agent reads /proc/PID/cmdline;
// reading the recording back (gpufeed report FILE) would scrub it again,
// so the recording is checked as served.
func TestAgentDetailsScrubCommandLineSecrets(t *testing.T) {
	livetest.Need(t)
	lightLive(t)
	if os.Getuid() != 0 {
		t.Skip("needs root: the detail socket serves a root client the jobs of every user")
	}
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	job := exec.Command(py, "-c", "import time; time.sleep(300)", "--password=hunter2", "postgres://u:s3cr3t@h/db")
	job.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := job.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = job.Process.Kill(); _ = job.Wait() }()
	pid := strconv.Itoa(job.Process.Pid)
	sock := filepath.Join(t.TempDir(), "agent.sock")
	a := startAgentProc(t, "node-scrub", "--device", "none", "--pid", pid, "--detail-socket", sock)
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	get := func(path string) (int, []byte) {
		resp, err := client.Get("http://agent" + path)
		if err != nil {
			t.Fatalf("GET %s on the detail socket: %v", path, err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return resp.StatusCode, b
	}
	deadline := time.Now().Add(60 * time.Second)
	code, body := get("/report?pid=" + pid)
	for (code == http.StatusServiceUnavailable || code == http.StatusNotFound) && time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		code, body = get("/report?pid=" + pid)
	}
	if code != http.StatusOK {
		t.Fatalf("/report on the socket: %d\n%s\n%s", code, body, a.log())
	}
	docs := map[string][]byte{}
	for _, path := range []string{"/report?pid=" + pid + "&verbose=1", "/report?pid=" + pid + "&format=json", "/recording?pid=" + pid} {
		code, b := get(path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, code, b)
		}
		if strings.HasPrefix(path, "/recording") {
			zr, err := gzip.NewReader(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if b, err = io.ReadAll(zr); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		docs[path] = b
	}
	for path, b := range docs {
		s := string(b)
		for _, secret := range []string{"hunter2", "s3cr3t"} {
			if strings.Contains(s, secret) {
				t.Errorf("%s holds the secret %q of the job's command line:\n%s", path, secret, tail(s, 3000))
			}
		}
		// The flag and the URL are still there, their secrets replaced
		// (the text report cuts a command line to 60 characters: the
		// interpreter and its script fill them).
		if strings.Contains(path, "verbose") {
			continue
		}
		for _, kept := range []string{"--password=", "postgres://u:"} {
			if !strings.Contains(s, kept) {
				t.Errorf("%s lacks %q of the job's command line: the command line is not shown at all, so the test proves nothing:\n%s", path, kept, tail(s, 3000))
			}
		}
	}
}
