package kineto

import (
	"bytes"
	"errors"
	"unicode/utf8"
)

// The scanner works on byte slices holding a part of the file. Every function
// takes the slice and a position and returns the position after what it read.
// errShort means the slice ended before the value did: the caller supplies
// more bytes (or, at the end of the file, reports truncation).

var errShort = errors.New("unexpected end of data")

// syntaxError is a parse failure at a position relative to the slice parsed.
type syntaxError struct {
	pos int
	msg string
}

func (e *syntaxError) Error() string { return e.msg }

func errAt(pos int, msg string) error { return &syntaxError{pos: pos, msg: msg} }

// isSpace reports JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\n' || c == '\r' || c == '\t' }

// skipSpace returns the position of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the position after the string starting at b[i] == '"'.
func skipString(b []byte, i int) (int, error) {
	// Most strings in a trace are short keys and values ("ph", "X"): look
	// at the first bytes directly before calling the vectorised search.
	j := i + 1
	for end := min(j+16, len(b)); j < end; j++ {
		switch b[j] {
		case '"':
			return j + 1, nil
		case '\\':
			j = end // fall back to the general loop below
		}
	}
	j = i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b), errShort
		}
		q := j + k
		// Count the backslashes right before the quote: an odd number escapes it.
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1, nil
		}
		j = q + 1
	}
}

// readString returns the contents of the string at b[i] == '"' (without
// quotes), whether it contains escapes, and the position after it.
func readString(b []byte, i int) (raw []byte, escaped bool, next int, err error) {
	next, err = skipString(b, i)
	if err != nil {
		return nil, false, next, err
	}
	raw = b[i+1 : next-1]
	return raw, bytes.IndexByte(raw, '\\') >= 0, next, nil
}

// unescape decodes JSON string escapes in raw, appending to dst. Invalid
// escapes are kept literally: names are for display, not worth failing on.
func unescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			dst = append(dst, c)
			continue
		}
		i++
		switch raw[i] {
		case '"', '\\', '/':
			dst = append(dst, raw[i])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, ok := hex4(raw, i+1)
			if !ok {
				dst = append(dst, '\\', 'u')
				continue
			}
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if r2, ok2 := hex4(raw, i+3); ok2 && r2 >= 0xDC00 && r2 < 0xE000 {
					r = (r-0xD800)<<10 | (r2 - 0xDC00) + 0x10000
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r)
		default:
			dst = append(dst, '\\', raw[i])
		}
	}
	return dst
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// structural marks the bytes skipValue must look at inside objects and arrays.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// skipValue returns the position after the JSON value starting at b[i]
// (i must point at its first byte). Scalars are not validated beyond their
// extent: the fields the model reads are parsed by their own functions.
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, errShort
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			c := b[j]
			if !structural[c] {
				continue
			}
			switch c {
			case '"':
				end, err := skipString(b, j)
				if err != nil {
					return end, err
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
		}
		return len(b), errShort
	case '}', ']', ',', ':':
		return i, errAt(i, "expected a value")
	}
	return scanScalar(b, i)
}

// scanScalar returns the end of a number or literal (true, null, NaN,
// -Infinity...) starting at b[i].
func scanScalar(b []byte, i int) (int, error) {
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\n', '\r', '\t':
			if j == i {
				return j, errAt(i, "expected a value")
			}
			return j, nil
		case '"', '{', '[', ':':
			return j, errAt(j, "unexpected character in a number")
		}
		j++
	}
	return j, errShort
}
