package cpuset

import "testing"

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string
		err  bool
	}{
		{"", "", false},
		{"0-3,8,10-11\n", "0-3,8,10-11", false},
		{"3,1,2,2", "1-3", false},
		{"0-15:2/4", "0-1,4-5,8-9,12-13", false},
		{"7-3", "", true},
		{"a", "", true},
		{"0-99999999", "", true},
		{"0-3:5/4", "", true},
	} {
		if Valid([]byte(tc.in)) == tc.err {
			t.Errorf("Valid(%q) = %v, want %v", tc.in, !tc.err, !tc.err)
		}
		got, err := Parse(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("Parse(%q) error %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if err == nil && got.String() != tc.want {
			t.Errorf("Parse(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
	a, _ := Parse("0-7")
	b, _ := Parse("4-11")
	if got := a.Intersect(b).String(); got != "4-7" {
		t.Errorf("Intersect = %s", got)
	}
	if got := a.Minus(b).String(); got != "0-3" {
		t.Errorf("Minus = %s", got)
	}
	if a.SubsetOf(b) || !a.Intersect(b).SubsetOf(b) {
		t.Error("SubsetOf wrong")
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"0-3,8", "0-15:2/4", "", "1-", "-1", "65535", "0-65535:1/65535"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		set, err := Parse(s)
		if Valid([]byte(s)) != (err == nil) {
			t.Fatalf("Valid(%q) = %v, but Parse says %v", s, err != nil, err)
		}
		if err != nil {
			return
		}
		again, err := Parse(set.String())
		if err != nil || again.String() != set.String() {
			t.Fatalf("round trip of %q: %s -> %s, %v", s, set, again, err)
		}
	})
}
