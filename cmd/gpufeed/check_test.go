package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden outputs of gpufeed check")

// buildGpufeed builds the binary once per test binary run.
func buildGpufeed(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gpufeed")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func runGpufeed(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return o.String(), e.String(), code
}

// TestCheckGolden runs gpufeed check over each fixture tree and compares
// text and JSON with the golden files (go test -run TestCheckGolden -update
// rewrites them).
func TestCheckGolden(t *testing.T) {
	bin := buildGpufeed(t)
	for _, tc := range []struct {
		name     string
		args     []string
		wantCode int
		wantFail string // a line the text output must hold
	}{
		{"server", nil, 0, ""},
		{"server-downgraded", nil, 1, "PCIe link downgraded: runs Gen3 x8, capable of Gen4 x16"},
		{"wrong-numa", []string{"--pid", "4242"}, 1, "bound to the far NUMA node"},
		{"powersave", nil, 0, "governor powersave on 32 of 32 CPUs"},
		{"container-shm", []string{"--pid", "4242", "--data", "/data/imagenet"}, 1, "/dev/shm is 64 MiB"},
		{"nfs-retrans", []string{"--pid", "4242", "--data", "/datasets/imagenet"}, 0, "0.48% of RPC calls retransmitted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join("..", "..", "testdata", "check", tc.name)
			for _, format := range []string{"text", "json"} {
				args := append([]string{"check", "--root", root, "--device", "none", "--window", "0", "-o", format}, tc.args...)
				out, errOut, code := runGpufeed(t, bin, args...)
				if code != tc.wantCode {
					t.Errorf("%s: exit %d, want %d; stderr: %s", format, code, tc.wantCode, errOut)
				}
				if errOut != "" {
					t.Errorf("%s: unexpected stderr: %s", format, errOut)
				}
				if format == "text" && tc.wantFail != "" && !strings.Contains(out, tc.wantFail) {
					t.Errorf("text output lacks %q", tc.wantFail)
				}
				if format == "json" {
					var rep struct {
						ExitStatus int `json:"exit_status"`
						Results    []struct {
							ID, Status string
						} `json:"results"`
					}
					if err := json.Unmarshal([]byte(out), &rep); err != nil {
						t.Fatalf("json output does not parse: %v", err)
					}
					if rep.ExitStatus != tc.wantCode || len(rep.Results) == 0 {
						t.Errorf("json exit_status %d with %d results", rep.ExitStatus, len(rep.Results))
					}
				}
				ext := map[string]string{"text": ".txt", "json": ".json"}[format]
				golden := filepath.Join("..", "..", "testdata", "check", "golden", tc.name+ext)
				if *update {
					if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (run with -update to create)", err)
				}
				if out != string(want) {
					t.Errorf("%s output differs from %s (run with -update after checking the change):\n%s", format, golden, firstDiff(string(want), out))
				}
			}
		})
	}
}

func firstDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return "line " + strconv.Itoa(i+1) + ":\n  want: " + w + "\n  got:  " + g
		}
	}
	return ""
}

// TestCheckLiveMachine runs gpufeed check on the machine the tests run on,
// with and without a target: it must finish, exit 0 unless a real check
// failed, and report nothing as an error (what the machine lacks is absent).
func TestCheckLiveMachine(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc on this machine")
	}
	bin := buildGpufeed(t)
	for _, args := range [][]string{
		{"check", "-o", "json", "--window", "0"},
		{"check", "-o", "json", "--window", "0", "--pid", strconv.Itoa(os.Getpid()), "--data", t.TempDir()},
	} {
		out, errOut, code := runGpufeed(t, bin, args...)
		if code != 0 && code != 1 {
			t.Fatalf("%v: exit %d, stderr %s", args, code, errOut)
		}
		var rep struct {
			Results []struct {
				ID, Status, Claim string
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v: json: %v", args, err)
		}
		for _, r := range rep.Results {
			if r.Status == "error" {
				t.Errorf("%v: %s reported an error: %s", args, r.ID, r.Claim)
			}
			if code == 0 && r.Status == "fail" {
				t.Errorf("%v: exit 0 with %s failed", args, r.ID)
			}
		}
	}
}

func TestCheckBadInvocations(t *testing.T) {
	bin := buildGpufeed(t)
	for _, args := range [][]string{
		{"check", "-o", "yaml"},
		{"check", "--root", t.TempDir()},
		{"check", "--root", filepath.Join("..", "..", "testdata", "check", "server"), "--pid", "999999"},
	} {
		_, errOut, code := runGpufeed(t, bin, args...)
		if code != 2 || !strings.HasPrefix(errOut, "gpufeed: ") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a gpufeed: message", args, code, errOut)
		}
	}
}

// TestCheckUnprivileged runs gpufeed check as nobody against a root-owned
// process: what needs ptrace access must come back not-visible with the
// privilege that would show it, never as zero or as a failure.
func TestCheckUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to drop to nobody")
	}
	dir, err := os.MkdirTemp("", "gpufeed-nobody")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "gpufeed")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "check", "-o", "json", "--window", "0", "--pid", strconv.Itoa(os.Getpid()))
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Skipf("cannot run as nobody here: %v", err)
	}
	var rep struct {
		Results []struct{ ID, Status, Need string } `json:"results"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, r := range rep.Results {
		got[r.ID] = r.Status
		if r.Status == "not-visible" && !strings.Contains(r.Need, "CAP_SYS_PTRACE") {
			t.Errorf("%s: not-visible without naming the privilege: %q", r.ID, r.Need)
		}
		if r.Status == "error" || r.Status == "fail" {
			t.Errorf("%s: %s as nobody", r.ID, r.Status)
		}
	}
	for _, id := range []string{"numa-memory", "nfs-mount"} {
		if got[id] != "not-visible" {
			t.Errorf("%s: %q as nobody, want not-visible", id, got[id])
		}
	}
}
