package finding

import (
	"strings"
	"testing"
)

func TestParseDocs(t *testing.T) {
	text := `// a comment
# some-id
What it says.

means: it means
  this, continued.
measured: read here
thresholds: 5 %, XProf
source: One — https://a
source: Two — https://b
  continued
change: do that

# other-id
Other.
means: m
measured: r
thresholds: none
source: s
change: c
`
	ds, err := ParseDocs("x.txt", text)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("%d docs, want 2", len(ds))
	}
	d := ds[0]
	if d.ID != "some-id" || d.Summary != "What it says." || d.Means != "it means this, continued." || d.Measured != "read here" ||
		d.Thresholds != "5 %, XProf" || len(d.Sources) != 2 || d.Sources[1] != "Two — https://b continued" || d.Change != "do that" {
		t.Errorf("parsed %+v", d)
	}
	for _, bad := range []string{
		"# a\nSummary.\nmeans: m\n", // missing fields
		"# a b\nSummary.\n",         // id with a space
		"text\n# a\n",               // text before the first id
		"# a\nS.\nmeans: m\nmeasured: r\nthresholds: t\nsource: s\nchange: c\n# a\nS.\nmeans: m\nmeasured: r\nthresholds: t\nsource: s\nchange: c\n", // twice
		"# a\nS.\n\nbogus line\n", // no field
	} {
		if _, err := ParseDocs("x.txt", bad); err == nil || !strings.Contains(err.Error(), "x.txt:") {
			t.Errorf("%q: error %v, want one naming the file and line", bad, err)
		}
	}
}

func TestExpandDocs(t *testing.T) {
	docs := []Doc{{ID: "a", Summary: "s", Means: "from {Share} of the window", Measured: "m", Thresholds: "{Share}, /proc/{stat,io}", Change: "c"}}
	got, err := ExpandDocs("x.txt", docs, map[string]string{"Share": "5 %"})
	if err != nil || got[0].Means != "from 5 % of the window" || got[0].Thresholds != "5 %, /proc/{stat,io}" {
		t.Errorf("expanded %+v, %v", got, err)
	}
	if docs[0].Means != "from {Share} of the window" {
		t.Error("ExpandDocs changed its input")
	}
	if _, err := ExpandDocs("x.txt", docs, nil); err == nil || !strings.Contains(err.Error(), "a: {Share}") {
		t.Errorf("a missing value: error %v, want one naming the doc and the placeholder", err)
	}
}
