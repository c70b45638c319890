package golden

import (
	"regexp"
	"strconv"
	"strings"
)

// internalReference is one kind of text that means something only inside
// the project: the documents its rules were drawn from (their numbers,
// section signs, French titles and task lists), its issue tracker and its
// repository layout. A user has none of them, so no output names them; a
// rule's sources are comments beside the rule, and `gpufeed explain ID`
// gives the public ones.
type internalReference struct {
	what string
	re   *regexp.Regexp
}

var internalReferences = []internalReference{
	{"the word seed", regexp.MustCompile(`(?i)\bseeds?\b`)},
	{"a seed number", regexp.MustCompile(`(^|[\s(;,"])00[024]([\s,;:)"]|$)`)},
	{"a section sign", regexp.MustCompile(`§`)},
	{"a French title", regexp.MustCompile(`[«»]|(?i)\b(goulot|côté|synchronisations excessives|erreurs? courantes?|mini-histoire|fait \d)\b`)},
	{"a playbook task", regexp.MustCompile(`\bTask \d`)},
	{"a checklist", regexp.MustCompile(`(?i)\bchecklist\b`)},
	{"an FAQ or symptom-table entry", regexp.MustCompile(`\b(FAQ|symptom) \d`)},
	{"an issue number", regexp.MustCompile(`(?i)\bissue #?\d`)},
	{"a repository path", regexp.MustCompile("(^|[\\s(\"',`\\[])(docs|internal)/[A-Za-z]")},
}

// InternalReferences returns, line by line, every internal reference in
// text ("line 12: a section sign: ...§7..."); nil when there is none.
func InternalReferences(text string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		for _, r := range internalReferences {
			if loc := r.re.FindStringIndex(line); loc != nil {
				lo, hi := max(0, loc[0]-30), min(len(line), loc[1]+30)
				out = append(out, "line "+strconv.Itoa(i+1)+": "+r.what+": …"+strings.ToValidUTF8(line[lo:hi], "")+"…")
			}
		}
	}
	return out
}
