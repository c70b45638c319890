package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gpufeed/gpufeed/internal/clitest"
	"github.com/gpufeed/gpufeed/internal/golden"
)

// TestCheckGolden runs gpufeed check over each fixture tree and compares
// text and JSON with the golden files (go test -run TestCheckGolden -update
// rewrites them).
func TestCheckGolden(t *testing.T) {
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
			for _, mode := range []string{"text", "verbose", "quiet", "json"} {
				format, flags, ext := mode, []string(nil), "."+mode+".txt"
				switch mode {
				case "text":
					ext = ".txt"
				case "json":
					ext = ".json"
				case "verbose":
					format, flags = "text", []string{"-v"}
				case "quiet":
					format, flags = "text", []string{"--quiet"}
				}
				args := append(append([]string{"check", "--root", root, "--device", "none", "--duration", "0", "-o", format}, flags...), tc.args...)
				out, errOut, code := run(t, args...)
				if code != tc.wantCode {
					t.Errorf("%s: exit %d, want %d; stderr: %s", format, code, tc.wantCode, errOut)
				}
				if errOut != "" {
					t.Errorf("%s: unexpected stderr: %s", format, errOut)
				}
				if mode == "verbose" && tc.wantFail != "" && !strings.Contains(out, tc.wantFail) {
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
				golden.Check(t, filepath.Join("..", "..", "testdata", "check", "golden", tc.name+ext), out)
			}
		})
	}
}

// TestCheckLiveMachine runs gpufeed check on the machine the tests run on,
// with and without a target: it must finish, exit 0 unless a real check
// failed, and report nothing as an error (what the machine lacks is absent).
func TestCheckLiveMachine(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc on this machine")
	}
	for _, args := range [][]string{
		{"check", "-o", "json", "--duration", "0"},
		{"check", "-o", "json", "--duration", "0", "--pid", strconv.Itoa(os.Getpid()), "--data", t.TempDir()},
	} {
		out, errOut, code := run(t, args...)
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
		validateSchema(t, out)
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
	for _, args := range [][]string{
		{"check", "-o", "yaml"},
		{"check", "--root", t.TempDir()},
		{"check", "--root", filepath.Join("..", "..", "testdata", "check", "server"), "--pid", "999999"},
	} {
		_, errOut, code := run(t, args...)
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
	bin := gpufeed(t) // in a directory nobody may read
	r := clitest.Run(t, bin, clitest.Cmd{Args: []string{"check", "-o", "json", "--duration", "0", "--pid", strconv.Itoa(os.Getpid())},
		Dir: filepath.Dir(bin), SysProcAttr: &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}})
	var rep struct {
		Results []struct{ ID, Status, Need string } `json:"results"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &rep); err != nil {
		t.Fatalf("json: %v (exit %d)\n%s%s", err, r.Code, r.Stdout, r.Stderr)
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
