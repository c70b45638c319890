package finding

import (
	"fmt"
	"regexp"
	"strings"
)

// Doc explains one finding ID: what `gpufeed explain ID` prints. Every ID
// a rule, a check or the trace judgement can emit has one, kept beside the
// rules in the text each package embeds (explain.txt).
type Doc struct {
	ID string `json:"id"`
	// Summary is one line: what the finding says.
	Summary string `json:"summary"`
	// Means says what the finding means and why it matters.
	Means string `json:"means"`
	// Measured says how it is measured: what is read, where, over what.
	Measured string `json:"measured"`
	// Thresholds are its cut-offs, each with where it comes from.
	Thresholds string `json:"thresholds"`
	// Sources are the public references behind it ("NVIDIA Nsight Systems
	// user guide, expert systems rules: https://...").
	Sources []string `json:"sources"`
	// Change is what to do about it.
	Change string `json:"change"`
	// From lists what emits the ID: "diagnose", "trace", "check".
	From []string `json:"from"`
}

// docKeys are the fields of a doc in the order explain prints them.
var docKeys = []string{"means", "measured", "thresholds", "source", "change"}

// ParseDocs reads the explain texts of one package. name is the file, for
// errors. The format, one block per ID:
//
//	# finding-id
//	One line: what the finding says.
//
//	means: what it means (lines that follow, up to a blank line or the next
//	  field, continue it)
//	measured: how it is measured
//	thresholds: its cut-offs and their sources
//	source: a public reference (repeat the field for each)
//	change: what to change
//
// Every field is required; From is the caller's to fill.
func ParseDocs(name, text string) ([]Doc, error) {
	var out []Doc
	var cur *Doc
	field := ""
	seen := map[string]bool{}
	finish := func(line int) error {
		if cur == nil {
			return nil
		}
		var missing []string
		if cur.Summary == "" {
			missing = append(missing, "summary line")
		}
		for _, k := range docKeys {
			if k == "source" && len(cur.Sources) == 0 || k != "source" && *cur.field(k) == "" {
				missing = append(missing, k)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%s:%d: %s: missing %s", name, line, cur.ID, strings.Join(missing, ", "))
		}
		out = append(out, *cur)
		return nil
	}
	lines := strings.Split(text, "\n")
	for i, raw := range lines {
		n := i + 1
		line := strings.TrimSpace(raw)
		switch {
		case strings.HasPrefix(raw, "# "):
			if err := finish(n); err != nil {
				return nil, err
			}
			id := strings.TrimSpace(raw[2:])
			if id == "" || strings.ContainsAny(id, " \t") {
				return nil, fmt.Errorf("%s:%d: %q: want \"# finding-id\"", name, n, raw)
			}
			if seen[id] {
				return nil, fmt.Errorf("%s:%d: %s explained twice", name, n, id)
			}
			seen[id] = true
			cur, field = &Doc{ID: id}, "summary"
		case line == "":
			if field != "summary" || cur == nil || cur.Summary != "" {
				field = ""
			}
		case strings.HasPrefix(line, "//"):
			// a comment for whoever edits the file
		case cur == nil:
			return nil, fmt.Errorf("%s:%d: text before the first \"# finding-id\"", name, n)
		default:
			if k, rest, ok := strings.Cut(line, ": "); ok && isDocKey(k) && raw == strings.TrimLeft(raw, " \t") {
				field = k
				if k == "source" {
					cur.Sources = append(cur.Sources, rest)
				} else {
					if *cur.field(k) != "" {
						return nil, fmt.Errorf("%s:%d: %s: %s given twice", name, n, cur.ID, k)
					}
					*cur.field(k) = rest
				}
				continue
			}
			switch field {
			case "":
				return nil, fmt.Errorf("%s:%d: %s: %q: want one of %s", name, n, cur.ID, line, strings.Join(docKeys, ", "))
			case "summary":
				if cur.Summary != "" {
					return nil, fmt.Errorf("%s:%d: %s: the summary is one line", name, n, cur.ID)
				}
				cur.Summary = line
			case "source":
				cur.Sources[len(cur.Sources)-1] += " " + line
			default:
				*cur.field(field) += " " + line
			}
		}
	}
	if err := finish(len(lines)); err != nil {
		return nil, err
	}
	return out, nil
}

func isDocKey(k string) bool {
	for _, d := range docKeys {
		if k == d {
			return true
		}
	}
	return false
}

func (d *Doc) field(k string) *string {
	switch k {
	case "means":
		return &d.Means
	case "measured":
		return &d.Measured
	case "thresholds":
		return &d.Thresholds
	case "change":
		return &d.Change
	}
	panic("finding: no doc field " + k)
}

// MustParseDocs is ParseDocs for the texts a package embeds: a malformed
// text is a programming error, caught by every test that loads it.
func MustParseDocs(name, text string) []Doc {
	d, err := ParseDocs(name, text)
	if err != nil {
		panic(err)
	}
	return d
}

// placeholder is {Name} in an explanation: a value the caller fills in.
var placeholder = regexp.MustCompile(`\{[A-Z][A-Za-z0-9]*\}`)

// ExpandDocs replaces every {Name} in the docs' texts with values[Name]
// (the judges' thresholds, written as people read them), so an explanation
// quotes the value the code uses. A name values lacks is an error naming
// the doc.
func ExpandDocs(name string, docs []Doc, values map[string]string) ([]Doc, error) {
	var bad []string
	expand := func(id, s string) string {
		return placeholder.ReplaceAllStringFunc(s, func(m string) string {
			v, ok := values[m[1:len(m)-1]]
			if !ok {
				bad = append(bad, id+": "+m)
				return m
			}
			return v
		})
	}
	out := make([]Doc, len(docs))
	for i, d := range docs {
		d.Summary, d.Means, d.Measured = expand(d.ID, d.Summary), expand(d.ID, d.Means), expand(d.ID, d.Measured)
		d.Thresholds, d.Change = expand(d.ID, d.Thresholds), expand(d.ID, d.Change)
		out[i] = d
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("%s: no value for %s", name, strings.Join(bad, ", "))
	}
	return out, nil
}

// MustExpandDocs is MustParseDocs then ExpandDocs, for embedded texts.
func MustExpandDocs(name, text string, values map[string]string) []Doc {
	d, err := ExpandDocs(name, MustParseDocs(name, text), values)
	if err != nil {
		panic(err)
	}
	return d
}
