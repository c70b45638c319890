package agentcmd

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gpufeed/gpufeed/internal/safetext"
)

// TestDurationsTakeBareSeconds: every duration flag of the agent reads a
// bare number as seconds and a unit as Go does; anything else is a usage
// error saying what the flag wants.
func TestDurationsTakeBareSeconds(t *testing.T) {
	for _, name := range []string{"interval", "slow-every", "window", "ring", "discover-every", "checks-every"} {
		for in, want := range map[string]time.Duration{"30": 30 * time.Second, "2.5": 2500 * time.Millisecond, "500ms": 500 * time.Millisecond, "2m": 2 * time.Minute, " 7 ": 7 * time.Second} {
			cmd := New("test", nil)
			if err := cmd.ParseFlags([]string{"--" + name, in}); err != nil {
				t.Fatalf("--%s %q: %v", name, in, err)
			}
			if got := cmd.Flags().Lookup(name).Value.String(); got != safetext.Duration(want) {
				t.Errorf("--%s %q = %s, want %s", name, in, got, safetext.Duration(want))
			}
		}
		for _, bad := range []string{"abc", "NaN", "Inf", "1e300", "30 s", "", "0x1p4", "-0X1P4"} { // hex floats: Go reads 0x1p4 as 16
			cmd := New("test", nil)
			cmd.SetArgs([]string{"--" + name, bad})
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			err := cmd.Execute()
			var u UsageError
			if !errors.As(err, &u) || !strings.Contains(err.Error(), "--"+name+" wants a duration: seconds (5, 2.5) or with a unit") {
				t.Errorf("--%s %q: %v, want a usage error saying what it wants", name, bad, err)
			}
		}
	}
}

// TestRootNamesEveryFileSystem: --root DIR reads DIR/proc, DIR/sys,
// DIR/dev/kmsg and the runtime's records under DIR, as diagnose --root
// does; a per-file-system flag given beside it wins (a DaemonSet sharing
// the node's PID namespace keeps its own /proc).
func TestRootNamesEveryFileSystem(t *testing.T) {
	for _, tc := range []struct {
		args                   []string
		proc, sys, host, kmsgP string
	}{
		{nil, "/proc", "/sys", "/", "/dev/kmsg"},
		{[]string{"--root", "/host"}, "/host/proc", "/host/sys", "/host", "/host/dev/kmsg"},
		{[]string{"--root", "/host", "--proc-root", "/proc"}, "/proc", "/host/sys", "/host", "/host/dev/kmsg"},
		{[]string{"--root", "/host", "--kmsg", "/dev/kmsg", "--host-root", "/"}, "/host/proc", "/host/sys", "/", "/dev/kmsg"},
		{[]string{"--sys-root", "/host/sys"}, "/proc", "/host/sys", "/", "/dev/kmsg"},
	} {
		cmd := New("test", nil)
		if err := cmd.ParseFlags(tc.args); err != nil {
			t.Fatal(err)
		}
		f := cmd.Flags()
		get := func(n string) string { return f.Lookup(n).Value.String() }
		proc, sys, host, k := underRoot(f, get("root"), get("proc-root"), get("sys-root"), get("host-root"), get("kmsg"))
		if proc != tc.proc || sys != tc.sys || host != tc.host || k != tc.kmsgP {
			t.Errorf("%v: proc %s, sys %s, host %s, kmsg %s; want %s, %s, %s, %s", tc.args, proc, sys, host, k, tc.proc, tc.sys, tc.host, tc.kmsgP)
		}
	}
}
