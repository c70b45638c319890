// Package safetext makes text that gpufeed did not write (process and thread
// names, command lines, kernel log lines, names in trace files, the content
// of a malformed file quoted in an error) safe to print on a terminal. Every
// output of every command passes such text through one of its functions, so
// they all treat the same characters the same way:
//
//   - control characters, C0 and C1 (ESC, CR, BS, BEL, NEL, CSI...) and DEL:
//     a terminal obeys them (move the cursor, clear the screen, recolour,
//     overwrite an earlier line);
//   - U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR: some terminals
//     and most viewers break the line there, so a name could forge a line;
//   - the bidirectional formatting characters (U+061C, U+200E, U+200F,
//     U+202A-U+202E, U+2066-U+2069; Unicode UAX #9, "explicit directional
//     formatting"): they reorder what follows on the line, so a name can make
//     a line read differently from what it holds (the "Trojan Source"
//     attack, CVE-2021-42574);
//   - bytes that are not UTF-8.
//
// Text is also capped (MaxRunes): a 200 MB event in a recording or a 5 KB
// line of garbage in a fixture prints as its first MaxRunes characters and
// a count of what was cut.
//
// JSON outputs keep the data: encoding/json already escapes control
// characters and U+2028/U+2029; EscapeJSON escapes the bidirectional
// characters the same way (\u202e), which leaves every value unchanged.
package safetext

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxRunes is the most characters one printed piece of text keeps. The
// longest text gpufeed writes itself (a decision) is under 500 characters;
// anything past this came from outside and is cut.
const MaxRunes = 1000

// Unsafe reports whether r must not reach a terminal as it is.
func Unsafe(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' || Bidi(r)
}

// Bidi reports whether r is a bidirectional formatting character.
func Bidi(r rune) bool {
	switch {
	case r == '\u061c', r == '\u200e', r == '\u200f':
		return true
	case r >= '\u202a' && r <= '\u202e':
		return true
	case r >= '\u2066' && r <= '\u2069':
		return true
	}
	return false
}

// needsWork reports whether s holds anything Clean or Escape would change.
func needsWork(s string) bool {
	if len(s) > MaxRunes && utf8.RuneCountInString(s) > MaxRunes {
		return true
	}
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || Unsafe(r) {
			return true
		}
		i += n
	}
	return false
}

// Clean replaces every unsafe character (and every byte that is not UTF-8)
// with '?' and caps the text at MaxRunes characters.
func Clean(s string) string {
	if !needsWork(s) {
		return s
	}
	return rewrite(s, func(b *strings.Builder, raw string) { b.WriteByte('?') })
}

// Escape writes every unsafe character (and every byte that is not UTF-8)
// as \xNN escapes of its bytes, so a reader can still tell what it was, and
// caps the text at MaxRunes characters.
func Escape(s string) string {
	if !needsWork(s) {
		return s
	}
	return rewrite(s, func(b *strings.Builder, raw string) {
		for _, c := range []byte(raw) {
			b.WriteString(`\x`)
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&15])
		}
	})
}

func rewrite(s string, unsafe func(b *strings.Builder, raw string)) string {
	return rewriteN(s, MaxRunes, unsafe)
}

func rewriteN(s string, max int, unsafe func(b *strings.Builder, raw string)) string {
	var b strings.Builder
	b.Grow(min(len(s), 4*max))
	kept := 0
	for i := 0; i < len(s); {
		if kept == max {
			b.WriteString(cutNote(len(s) - i))
			break
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || Unsafe(r) {
			unsafe(&b, s[i:i+n])
		} else {
			b.WriteString(s[i : i+n])
		}
		kept++
		i += n
	}
	return b.String()
}

func cutNote(bytes int) string {
	return "… (" + strconv.Itoa(bytes) + " more bytes cut)"
}

// Cap cuts s to at most n characters (at a character boundary), saying how
// much was cut. It does not clean: use it on text that is cleaned later, or
// to bound what an error message quotes.
func Cap(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i, kept := 0, 0
	for i < len(s) && kept < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		kept++
	}
	if i >= len(s) {
		return s
	}
	return s[:i] + cutNote(len(s)-i)
}

// bidiUTF8 lists the UTF-8 forms of the bidirectional formatting characters.
var bidiUTF8 = func() [][]byte {
	var out [][]byte
	for _, r := range []rune{'\u061c', '\u200e', '\u200f', '\u202a', '\u202b', '\u202c', '\u202d', '\u202e',
		'\u2066', '\u2067', '\u2068', '\u2069'} {
		out = append(out, []byte(string(r)))
	}
	return out
}()

// EscapeJSON rewrites the bidirectional formatting characters in encoded
// JSON as \uXXXX escapes. In JSON such a character can only stand inside a
// string, where the escape means the same character: the document decodes to
// the same values, and a terminal showing it is not reordered.
func EscapeJSON(b []byte) []byte {
	if !bytes.ContainsAny(b, "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069") {
		return b
	}
	for _, seq := range bidiUTF8 {
		r, _ := utf8.DecodeRune(seq)
		b = bytes.ReplaceAll(b, seq, []byte(`\u`+strconv.FormatInt(int64(0x10000+r), 16)[1:]))
	}
	return b
}

// MaxLineRunes is the most characters CleanLine keeps of one output line:
// a line gpufeed composes holds a few names and numbers; past this, it
// quotes garbage.
const MaxLineRunes = MaxRunes + 100

// CleanLine is Clean for a whole line of output that gpufeed composed (a
// report line holding several names): unsafe characters become '?', and
// the line is capped at MaxLineRunes characters. The text renderers pass
// every line they write through it.
func CleanLine(s string) string {
	if !needsWork(s) {
		return s
	}
	return rewriteN(s, MaxLineRunes, func(b *strings.Builder, raw string) { b.WriteByte('?') })
}
