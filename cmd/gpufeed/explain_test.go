package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/check"
	"github.com/gpufeed/gpufeed/internal/finding"
	"github.com/gpufeed/gpufeed/internal/golden"
	"github.com/gpufeed/gpufeed/internal/judge"
	"github.com/gpufeed/gpufeed/internal/judge/frozen"
	"github.com/gpufeed/gpufeed/internal/judge/tracejudge"
)

// TestExplainGolden pins `gpufeed explain` (every ID with its summary) and
// one ID's full explanation.
func TestExplainGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"explain-list", []string{"explain"}},
		{"explain-launch-thread-saturated", []string{"explain", "launch-thread-saturated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, stderr, code := run(t, tc.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			golden.Check(t, filepath.Join("..", "..", "testdata", "golden", "cli", tc.name+".txt"), out)
		})
	}
}

// TestExplainUnknownID: a typo exits 3 (not a usage error's 2) and names
// the nearest IDs; an old name and a class name say what to ask for.
func TestExplainUnknownID(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"lauch-thread-saturated", "did you mean launch-thread-saturated?"},
		{"sync", "did you mean sync-calls, sync-copies, sync-memsets"},
		{"host-wait-sync", "it is now launch-thread-waits-on-gpu"},
		{"storage-bound", "storage-bound is a verdict class, stated by input-waits-on-storage"},
		{"qqqqqqqq", `no finding has the ID "qqqqqqqq" (gpufeed explain lists them all)`},
	} {
		out, stderr, code := run(t, "explain", tc.id)
		if code != exitUnknownID || out != "" || !strings.Contains(stderr, tc.want) {
			t.Errorf("explain %s: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.id, code, out, stderr, exitUnknownID, tc.want)
		}
	}
	if _, _, code := run(t, "explain", "a", "b"); code != 2 {
		t.Errorf("explain with two IDs: exit %d, want the usage error's 2", code)
	}
}

// emitterIDs is every finding ID a registry says some rule emits, with the
// registries that say so.
func emitterIDs() map[string][]string {
	ids := map[string][]string{}
	for _, r := range judge.Rules() {
		for _, id := range r.IDs() {
			ids[id] = append(ids[id], "live rule "+r.ID)
		}
	}
	for _, id := range frozen.IDs() {
		ids[id] = append(ids[id], "frozen-job triage")
	}
	for _, id := range tracejudge.IDs() {
		ids[id] = append(ids[id], "trace rules")
	}
	for _, c := range check.Checks() {
		ids[c.ID] = append(ids[c.ID], "check "+c.ID)
	}
	return ids
}

// TestEveryFindingIDExplained enumerates every registry (live rules,
// frozen-job triage, trace rules and rank comparison, platform checks):
// every ID one emits has exactly one explanation, and every explanation
// has an emitter.
func TestEveryFindingIDExplained(t *testing.T) {
	var docs []finding.Doc
	for _, set := range [][]finding.Doc{judge.Docs(), tracejudge.Docs(), check.Docs()} {
		docs = append(docs, set...)
	}
	explained := map[string]bool{}
	for _, d := range docs {
		if explained[d.ID] {
			t.Errorf("%s is explained twice", d.ID)
		}
		explained[d.ID] = true
		for _, s := range d.Sources {
			if !strings.Contains(s, "https://") {
				t.Errorf("%s: source %q has no public address", d.ID, s)
			}
		}
	}
	ids := emitterIDs()
	for id, by := range ids {
		if !explained[id] {
			t.Errorf("%s (emitted by %s) has no explanation: add it to the explain.txt beside the rule", id, strings.Join(by, ", "))
		}
	}
	for id := range explained {
		if ids[id] == nil {
			t.Errorf("%s is explained, but no registry emits it", id)
		}
	}
	if _, err := findingDocs(); err != nil {
		t.Error(err)
	}
	if len(docs) < 90 {
		t.Errorf("%d explanations: fewer than the registries hold", len(docs))
	}
}

// TestRegistriesHoldEveryIDTheCodeWrites reads the judges' and the checks'
// source: every finding ID written as a literal (ID: "x", id: "x",
// f.ID = "x") is one a registry declares, and every ID a registry declares
// is written somewhere, so neither a rule emitting an undeclared ID nor a
// declared ID nothing emits goes unnoticed.
func TestRegistriesHoldEveryIDTheCodeWrites(t *testing.T) {
	written := map[string]string{}
	root := filepath.Join("..", "..", "internal")
	for _, dir := range []string{"judge", "judge/frozen", "judge/tracejudge", "check"} {
		for id, pos := range literalIDs(t, filepath.Join(root, dir)) {
			written[id] = pos
		}
	}
	ids := emitterIDs()
	ruleIDs := map[string]bool{}
	for _, r := range judge.Rules() {
		ruleIDs[r.ID] = true
	}
	var undeclared []string
	for id, pos := range written {
		if ids[id] == nil && !ruleIDs[id] {
			undeclared = append(undeclared, pos+": "+id)
		}
	}
	sort.Strings(undeclared)
	for _, u := range undeclared {
		t.Errorf("%s is written as a finding ID but no registry declares it (Rule.Emits, explain.txt, check registry)", u)
	}
	for id, by := range ids {
		if _, ok := written[id]; !ok && !slices.Contains(tracejudge.IDs(), id) {
			t.Errorf("%s is declared by %s but no code writes it", id, strings.Join(by, ", "))
		}
	}
}

// literalIDs returns the string literals a package's non-test source
// assigns to an ID (or id) field, with their positions.
func literalIDs(t *testing.T, dir string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	lit := func(e ast.Expr) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			if s, err := strconv.Unquote(b.Value); err == nil {
				out[s] = fset.Position(b.Pos()).String()
			}
		}
	}
	isID := func(e ast.Expr) bool {
		switch x := e.(type) {
		case *ast.Ident:
			return x.Name == "ID" || x.Name == "id"
		case *ast.SelectorExpr:
			return x.Sel.Name == "ID" || x.Sel.Name == "id"
		}
		return false
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.CompositeLit:
				if sel, ok := x.Type.(*ast.Ident); ok && sel.Name == "Rule" {
					return true // a live rule's own name, not a finding's
				}
				for _, el := range x.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok && isID(kv.Key) {
						lit(kv.Value)
					}
				}
			case *ast.AssignStmt:
				for i, l := range x.Lhs {
					if isID(l) && i < len(x.Rhs) {
						lit(x.Rhs[i])
					}
				}
			}
			return true
		})
	}
	return out
}
