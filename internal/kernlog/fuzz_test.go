package kernlog

import (
	"github.com/gpufeed/gpufeed/internal/safetext"

	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// seedLines adds every line of the kernel log reader's fixtures to a fuzz corpus.
func seedLines(f *testing.F, add func(string)) {
	files, _ := filepath.Glob("testdata/kmsg/*/*")
	for _, p := range files {
		if !strings.HasSuffix(p, ".txt") && !strings.HasSuffix(p, ".kmsg") {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			add(l)
		}
	}
}

func FuzzParseRecord(f *testing.F) {
	seedLines(f, func(s string) { f.Add([]byte(s)) })
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseRecord(b)
		if err != nil {
			return
		}
		if e.Level < 0 || e.Level > 7 || e.Mono < 0 {
			t.Errorf("bad entry %+v", e)
		}
		ParseEntry(e)
	})
}

func FuzzParseLine(f *testing.F) {
	seedLines(f, func(s string) { f.Add(s) })
	f.Fuzz(func(t *testing.T, s string) {
		e := ParseLine(s)
		if e.Level < -1 || e.Level > 7 || e.Mono < 0 || len(e.Message) > len(s) {
			t.Errorf("ParseLine(%q) = %+v", s, e)
		}
		ParseJournalLine(s)
	})
}

func FuzzParseMessage(f *testing.F) {
	seedLines(f, func(s string) { f.Add(ParseLine(s).Message) })
	f.Fuzz(func(t *testing.T, msg string) {
		ev, ok := ParseMessage(msg)
		if !ok {
			return
		}
		if ev.Raw != msg || ev.PID < 0 || ev.Xid < 0 || ev.Blocked < 0 {
			t.Errorf("ParseMessage(%q) = %+v", msg, ev)
		}
		for _, q := range ev.Memory {
			if q.Bytes() < q.Value {
				t.Errorf("%s overflowed: %d %s", q.Name, q.Value, q.Unit)
			}
		}
		Kills([]Event{ev, ev})
		for _, r := range safetext.Escape(ev.Comm + ev.Raw) {
			if unicode.IsControl(r) {
				t.Errorf("safetext.Escape left a control character in %q", ev.Raw)
			}
		}
	})
}
