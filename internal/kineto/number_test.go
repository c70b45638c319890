package kineto

import "testing"

func TestParseMicrosAsNanos(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		kind numKind
	}{
		{"1712195495519689.047", 1712195495519689047, numOK}, // beyond float64's 15-16 digits
		{"1712195495519689", 1712195495519689000, numOK},
		{"68.0", 68000, numOK},
		{"4.928", 4928, numOK},
		{"0.0005", 1, numOK}, // half a nanosecond rounds away from zero
		{"0.0004", 0, numOK},
		{"1e3", 1000000, numOK},
		{"1.5E-3", 2, numOK},
		{"-5", -5000, numOK},
		{"0", 0, numOK},
		{"12.3456789", 12346, numOK},
		{"NaN", 0, numNaN},
		{"-nan", 0, numNaN},
		{"inf", 0, numInf},
		{"-Infinity", 0, numInf},
		{"99999999999999999999999", 0, numInf}, // does not fit int64 ns
		{"", 0, numBad},
		{"1.2.3", 0, numBad},
		{"1e", 0, numBad},
		{"-", 0, numBad},
		{"true", 0, numBad},
	} {
		got, kind := parseMicrosAsNanos([]byte(tc.in))
		if kind != tc.kind || (kind == numOK && got != tc.want) {
			t.Errorf("parseMicrosAsNanos(%q) = %d, kind %d; want %d, kind %d", tc.in, got, kind, tc.want, tc.kind)
		}
	}
}

func TestParseInt(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"7", 7, true}, {"7.0", 7, true}, {"-1", -1, true}, {"1e3", 1000, true},
		{"135071", 135071, true}, {"NaN", 0, false}, {"x", 0, false},
	} {
		got, ok := parseInt([]byte(tc.in))
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseInt(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`plain`:             "plain",
		`a\"b`:              `a"b`,
		`tab\there`:         "tab\there",
		`\u00e9t\u00e9`:     "été",
		`\ud83d\ude00`:      "😀",
		`bad \x escape`:     `bad \x escape`,
		`trailing \u12`:     `trailing \u12`,
		`back\\slash\/done`: `back\slash/done`,
	} {
		if got := string(unescape(nil, []byte(in))); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFindCut(t *testing.T) {
	for in, want := range map[string]int{
		`{"a":1}, {"b":2}`:           9,
		`{"a":1},` + "\n  " + `{"b"`: 11,
		`{"a":{"x":1}}`:              -1,
		`{"a":1}`:                    -1,
		`"}, {" tail`:                4, // a false boundary inside a string: the decoder detects and re-reads it
	} {
		if got := findCut([]byte(in)); got != want {
			t.Errorf("findCut(%q) = %d, want %d", in, got, want)
		}
	}
}
