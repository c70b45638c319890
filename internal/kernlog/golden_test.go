package kernlog

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/golden"
)

// fixtureEntries reads a fixture: raw kmsg records (.kmsg) or text lines.
func fixtureEntries(t *testing.T, path string) []Entry {
	t.Helper()
	if strings.HasSuffix(path, ".kmsg") {
		r := &Reader{Path: path, NoFallback: true, BootTime: fixedBoot}
		log, err := r.Read(t.Context())
		if err != nil {
			t.Fatalf("reading %s: %v", path, err)
		}
		if log.Skipped != 0 {
			t.Errorf("%s: %d records did not parse", path, log.Skipped)
		}
		return log.Entries
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []Entry
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		out = append(out, ParseLine(line))
	}
	return out
}

// describe renders an event on one line for the golden files.
func describe(ev Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s", ev.Kind)
	if ev.HasMono {
		fmt.Fprintf(&b, " mono=%s", ev.Mono)
	}
	if !ev.Wall.IsZero() {
		fmt.Fprintf(&b, " wall=%s", ev.Wall.Format("2006-01-02T15:04:05.000000"))
	}
	if ev.PID != 0 {
		fmt.Fprintf(&b, " pid=%d", ev.PID)
	}
	if ev.Comm != "" {
		fmt.Fprintf(&b, " comm=%q", ev.Comm)
	}
	if ev.UID != nil {
		fmt.Fprintf(&b, " uid=%d", *ev.UID)
	}
	for _, q := range ev.Memory {
		fmt.Fprintf(&b, " %s=%d%s", q.Name, q.Value, q.Unit)
	}
	if ev.Score != nil {
		fmt.Fprintf(&b, " score=%d", *ev.Score)
	}
	if ev.OOMScoreAdj != nil {
		fmt.Fprintf(&b, " oom_score_adj=%d", *ev.OOMScoreAdj)
	}
	for _, kv := range [][2]string{{"constraint", ev.Constraint}, {"memcg", ev.MemCG}, {"task_memcg", ev.TaskMemCG},
		{"pci", ev.PCI}, {"trap", ev.Trap}, {"addr", ev.Addr}, {"ip", ev.IP}, {"sp", ev.SP}, {"error", ev.Error},
		{"object", ev.Object}, {"detail", ev.Detail}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, " %s=%q", kv[0], kv[1])
		}
	}
	if ev.Global {
		b.WriteString(" global")
	}
	if ev.Blocked != 0 {
		fmt.Fprintf(&b, " blocked=%s", ev.Blocked)
	}
	if ev.Xid != 0 {
		fmt.Fprintf(&b, " xid=%d", ev.Xid)
	}
	if ev.FellOff {
		b.WriteString(" fell-off-bus")
	}
	return b.String()
}

func describeKill(k Kill) string {
	s := fmt.Sprintf("kill pid=%d comm=%q resident=%d anon=%d total-vm=%d constraint=%q memcg=%q task_memcg=%q limit=%d usage=%d trigger=%q reaped=%v",
		k.PID, k.Comm, k.ResidentBytes, k.AnonRSSBytes, k.TotalVMBytes, k.Constraint, k.MemCG, k.TaskMemCG,
		k.LimitBytes, k.UsageBytes, k.Trigger, k.Reaped)
	if k.Score != nil {
		s += fmt.Sprintf(" score=%d", *k.Score)
	}
	return s
}

// TestFixturesGolden parses every real kernel log fixture and compares what
// was recognised with the reviewed golden output.
func TestFixturesGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/kmsg/*/*")
	if err != nil {
		t.Fatal(err)
	}
	var fixtures []string
	for _, f := range files {
		if strings.HasSuffix(f, ".txt") || strings.HasSuffix(f, ".kmsg") {
			fixtures = append(fixtures, f)
		}
	}
	sort.Strings(fixtures)
	if len(fixtures) < 15 {
		t.Fatalf("found %d fixtures, want the whole set", len(fixtures))
	}
	for _, f := range fixtures {
		t.Run(filepath.Base(f), func(t *testing.T) {
			events := Events(fixtureEntries(t, f))
			if len(events) == 0 {
				t.Fatalf("%s: nothing recognised", f)
			}
			var b strings.Builder
			for _, ev := range events {
				b.WriteString(describe(ev))
				b.WriteByte('\n')
			}
			for _, k := range Kills(events) {
				b.WriteString(describeKill(k))
				b.WriteByte('\n')
			}
			golden.Check(t, filepath.Join("testdata/kmsg/golden", strings.TrimSuffix(filepath.Base(f), filepath.Ext(f))+".golden"), b.String())
		})
	}
}
