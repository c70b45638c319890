package safetext

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCleanAndEscape(t *testing.T) {
	for _, tc := range []struct{ in, clean, escape string }{
		{"pt_main_thread", "pt_main_thread", "pt_main_thread"},
		{"名前 café", "名前 café", "名前 café"},
		{"\x1b[2J", "?[2J", `\x1b[2J`},
		{"a\r\nb\tc\x7f", "a??b?c?", `a\x0d\x0ab\x09c\x7f`},
		{"\u009b2J", "?2J", `\xc2\x9b2J`}, // C1 CSI
		{"ok\u2028line\u2029", "ok?line?", `ok\xe2\x80\xa8line\xe2\x80\xa9`},
		{"gpu\u202eexe.txt", "gpu?exe.txt", `gpu\xe2\x80\xaeexe.txt`},
		{"\u2066iso\u2069\u200e\u200f\u061c", "?iso????", `\xe2\x81\xa6iso\xe2\x81\xa9\xe2\x80\x8e\xe2\x80\x8f\xd8\x9c`},
		{"bad\xffutf8", "bad?utf8", `bad\xffutf8`},
	} {
		if got := Clean(tc.in); got != tc.clean {
			t.Errorf("Clean(%q) = %q, want %q", tc.in, got, tc.clean)
		}
		if got := Escape(tc.in); got != tc.escape {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.escape)
		}
	}
}

func TestCapsLongText(t *testing.T) {
	long := strings.Repeat("é", 5000)
	for name, got := range map[string]string{"Clean": Clean(long), "Escape": Escape(long), "Cap": Cap(long, MaxRunes)} {
		if !strings.HasPrefix(got, strings.Repeat("é", MaxRunes)+"… (8000 more bytes cut)") || utf8.RuneCountInString(got) > MaxRunes+30 {
			t.Errorf("%s: %d runes, ends %q", name, utf8.RuneCountInString(got), got[len(got)-30:])
		}
	}
	if s := strings.Repeat("x", MaxRunes); Clean(s) != s || Cap(s, MaxRunes) != s {
		t.Error("text of exactly MaxRunes is kept whole")
	}
}

func TestEscapeJSONKeepsValues(t *testing.T) {
	in := map[string]string{"name": "a\u202eb\u2066c\u061cd\u200f", "plain": "x"}
	b, _ := json.Marshal(in)
	out := EscapeJSON(b)
	if strings.ContainsFunc(string(out), Bidi) {
		t.Fatalf("bidirectional controls left: %q", out)
	}
	if !strings.Contains(string(out), `a\u202eb\u2066c\u061cd\u200f`) {
		t.Errorf("escaped as %s", out)
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["name"] != in["name"] || back["plain"] != "x" {
		t.Errorf("values changed: %v %q", err, back)
	}
}

// CleanLine cleans like Clean but keeps a composed line up to
// MaxLineRunes characters, then says how much was cut.
func TestCleanLine(t *testing.T) {
	line := strings.Repeat("a", MaxRunes+50) + "\u2028\x1b"
	if got := CleanLine(line); got != strings.Repeat("a", MaxRunes+50)+"??" {
		t.Errorf("CleanLine of a %d-rune line: %d runes, %q at its end", MaxRunes+52, utf8.RuneCountInString(got), got[len(got)-10:])
	}
	long := strings.Repeat("b", 3*MaxLineRunes)
	if got := CleanLine(long); utf8.RuneCountInString(got) > MaxLineRunes+40 || !strings.HasSuffix(got, "more bytes cut)") {
		t.Errorf("CleanLine of %d runes: %d runes out", len(long), utf8.RuneCountInString(got))
	}
}

// Whatever goes in, what comes out holds no unsafe character, is UTF-8 and
// is bounded.
func FuzzClean(f *testing.F) {
	for _, s := range []string{"plain", "\x1b[2J\u202e\u2028", "\xff\xfe", strings.Repeat("\u2066", 1200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Clean(s), Escape(s), CleanLine(s)} {
			if !utf8.ValidString(out) || strings.ContainsFunc(out, Unsafe) {
				t.Fatalf("%q -> %q", s, out)
			}
			if utf8.RuneCountInString(out) > 12*MaxRunes+40 {
				t.Fatalf("%d runes out", utf8.RuneCountInString(out))
			}
		}
		b, _ := json.Marshal(s)
		if strings.ContainsFunc(string(EscapeJSON(b)), Bidi) {
			t.Fatalf("bidi left in JSON of %q", s)
		}
	})
}
