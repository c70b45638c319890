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

// goSymbol is a function of Go's own standard library under its internal/
// tree, as a CPU profile of a Go program names it
// ("internal/runtime/syscall/linux.EpollWait", "internal/poll.(*FD).Read"):
// a package path, then a dot and a receiver or an identifier that is no
// file's extension. It is the profiled
// program's, not a path of this repository.
var goSymbol = regexp.MustCompile(`^internal/[a-z0-9_/]+\.(\(|[A-Za-z_][A-Za-z0-9_]*)`)

var fileExtensions = map[string]bool{"go": true, "md": true, "txt": true, "json": true, "yaml": true, "yml": true,
	"c": true, "h": true, "py": true, "sh": true, "gpufeed": true, "html": true, "golden": true, "text": true}

// isGoSymbol says the repository-path match at loc is a Go symbol.
func isGoSymbol(line string, loc []int) bool {
	at := strings.Index(line[loc[0]:loc[1]], "internal/")
	if at < 0 {
		return false
	}
	m := goSymbol.FindStringSubmatch(line[loc[0]+at:])
	return m != nil && !fileExtensions[strings.ToLower(m[1])]
}

// InternalReferences returns, line by line, every internal reference in
// text ("line 12: a section sign: ...§7..."); nil when there is none.
func InternalReferences(text string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		for _, r := range internalReferences {
			var loc []int
			for _, l := range r.re.FindAllStringIndex(line, -1) {
				if r.what != "a repository path" || !isGoSymbol(line, l) {
					loc = l
					break
				}
			}
			if loc != nil {
				lo, hi := max(0, loc[0]-30), min(len(line), loc[1]+30)
				out = append(out, "line "+strconv.Itoa(i+1)+": "+r.what+": …"+strings.ToValidUTF8(line[lo:hi], "")+"…")
			}
		}
	}
	return out
}
