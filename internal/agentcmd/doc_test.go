package agentcmd

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpufeed/gpufeed/internal/agent"
)

// TestAgentDocMatchesFlags: docs/AGENT.md's flag table lists every flag of
// `gpufeed agent` with the default --help shows, and the defaults its
// prose states ("(`--interval`, 2s)", "the defaults give 30" intervals a
// window) are the flags' own.
func TestAgentDocMatchesFlags(t *testing.T) {
	b, err := os.ReadFile("../../docs/AGENT.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	flags := New("test", nil).Flags()
	row := regexp.MustCompile("(?m)^\\| `--([a-z.-]+)`(?:, `-[a-z]`)? \\| ([^|]+) \\|")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(doc, -1) {
		name, def := m[1], strings.Trim(strings.TrimSpace(m[2]), "`")
		f := flags.Lookup(name)
		if f == nil {
			t.Errorf("docs/AGENT.md lists --%s, which agent does not take", name)
			continue
		}
		seen[name] = true
		if !sameDefault(f, def) {
			t.Errorf("docs/AGENT.md: --%s defaults to %q; agent --help says %q", name, def, f.DefValue)
		}
	}
	flags.VisitAll(func(f *pflag.Flag) {
		if !f.Hidden && f.Name != "help" && !seen[f.Name] {
			t.Errorf("docs/AGENT.md's flag table lacks --%s", f.Name)
		}
	})
	prose := regexp.MustCompile("\\(`--([a-z-]+)`, ([0-9][^)]*)\\)|`--([a-z-]+)`, ([0-9][0-9a-z]*),")
	n := 0
	for _, m := range prose.FindAllStringSubmatch(doc, -1) {
		name, def := m[1]+m[3], m[2]+m[4]
		f := flags.Lookup(name)
		if f == nil {
			t.Errorf("docs/AGENT.md names --%s, which agent does not take", name)
			continue
		}
		n++
		if !sameDefault(f, def) {
			t.Errorf("docs/AGENT.md says --%s is %q by default; agent --help says %q", name, def, f.DefValue)
		}
	}
	if n < 7 {
		t.Errorf("found %d defaults in the prose, want the durations and the cap on jobs'", n)
	}
	m := regexp.MustCompile(`the defaults give (\d+)`).FindStringSubmatch(doc)
	if want := int(agent.DefaultWindow / agent.DefaultInterval); m == nil || m[1] != strconv.Itoa(want) {
		t.Errorf("docs/AGENT.md: intervals a window by default %v, want %d", m, want)
	}
}

// sameDefault compares a default as the doc writes it with the flag's.
func sameDefault(f *pflag.Flag, doc string) bool {
	switch doc {
	case "none":
		return f.DefValue == "" || f.DefValue == "[]"
	case "off":
		return f.DefValue == "false"
	}
	if f.Value.Type() == "duration" {
		d, err := ParseSeconds(doc)
		want, err2 := time.ParseDuration(f.DefValue)
		return err == nil && err2 == nil && d == want
	}
	return doc == f.DefValue
}
