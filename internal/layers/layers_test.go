package layers

import (
	"errors"
	"fmt"
	"go/build"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gpufeed/gpufeed/internal/golden"
)

const module = "github.com/gpufeed/gpufeed"

// Layers, bottom up, and the layers each may import (its own included).
var layers = []struct {
	name    string
	imports []string
	pkgs    []string
}{
	{"vocabulary", []string{"vocabulary"}, []string{
		"internal/finding", "internal/timeline", "internal/cpuset", "internal/safetext", "internal/gpu",
		"internal/trace", "internal/kernlog", "internal/profile", "internal/drillresult", "python"}},
	{"sources", []string{"vocabulary", "sources"}, []string{
		"internal/procfs", "internal/podinfo", "internal/sample", "internal/check",
		"internal/pyspy", "internal/pysample", "internal/cpusample", "internal/bpfcap", "internal/syscalls", "internal/driverprobe", "internal/schedbpf",
		"internal/nvml", "internal/gpusource", "internal/sim", "internal/sim/wire", "internal/sim/simclient", "internal/sim/simcuda", "internal/sim/cudadrv",
		"internal/kineto", "internal/nsys", "internal/traceload", "internal/tracegen", "internal/demo", "internal/drill"}},
	{"derive", []string{"vocabulary", "derive"}, []string{"internal/derive", "internal/derive/tracestats"}},
	{"judge", []string{"vocabulary", "derive", "judge"}, []string{
		"internal/judge", "internal/judge/frozen", "internal/judge/thresholds", "internal/judge/tracejudge", "internal/compare"}},
	{"render", []string{"vocabulary", "derive", "judge", "render"}, []string{"internal/render"}},
	{"pipeline", []string{"vocabulary", "sources", "derive", "judge", "render", "pipeline"}, []string{"internal/agent", "internal/diagnose", "internal/live"}},
	{"commands", []string{"vocabulary", "sources", "derive", "judge", "render", "pipeline", "commands"}, []string{"cmd/gpufeed", "cmd/gpufeed-agent", "cmd/tracegen", "internal/agentcmd"}},
	{"testing", []string{"vocabulary", "testing"}, []string{"internal/golden", "internal/browsertest", "internal/clitest", "internal/testjob", "internal/layers", "internal/livetest", "scripts/testlog"}},
}

// graph lists the module's packages and their direct imports within it
// (test files left out: a test may use any package to build its fixture).
// It reads the sources with go/build, in this process, so that go test's
// cache knows which files the result depends on.
func graph(t *testing.T) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	g := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if path != root && (name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		if path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own (deploy/validate): not gpufeed's packages
			}
		}
		p, err := build.Default.ImportDir(path, 0)
		if err != nil {
			var noGo *build.NoGoError
			if errors.As(err, &noGo) {
				return nil
			}
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		g[rel] = []string{}
		for _, imp := range p.Imports {
			if r, ok := strings.CutPrefix(imp, module+"/"); ok {
				g[rel] = append(g[rel], r)
			}
		}
		slices.Sort(g[rel])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func layerOf() map[string]string {
	m := map[string]string{}
	for _, l := range layers {
		for _, p := range l.pkgs {
			m[p] = l.name
		}
	}
	return m
}

// TestImportsRunOneWay fails when a package imports one of a layer its own
// may not use: a source imports a derive, judge or render package, a
// renderer or a judge a source, or a package imports one above it.
func TestImportsRunOneWay(t *testing.T) {
	g := graph(t)
	of := layerOf()
	allowed := map[string][]string{}
	for _, l := range layers {
		allowed[l.name] = l.imports
	}
	for p := range g {
		if of[p] == "" {
			t.Errorf("package %s belongs to no layer: add it to the table in layers_test.go and to docs/ARCHITECTURE.md", p)
		}
	}
	for p := range of {
		if _, ok := g[p]; !ok {
			t.Errorf("the layer table names %s, which no longer exists", p)
		}
	}
	for p, imps := range g {
		for _, imp := range imps {
			lp, li := of[p], of[imp]
			if lp == "" || li == "" {
				continue
			}
			if !slices.Contains(allowed[lp], li) {
				t.Errorf("%s (%s) imports %s (%s): %s may import only %s", p, lp, imp, li, lp, strings.Join(allowed[lp], ", "))
			}
		}
	}
}

// TestNoArrowRunsUp fails when a layer may import a layer above its own
// (the table itself running back up), when a package imports one of a
// higher layer, or when a directory holds packages of two layers. A
// directory is a room: the tree under one directory of internal/ or cmd/
// (internal/gpu with everything below it). A room that held a vocabulary
// package and a source under it (internal/gpu and internal/nvml) made
// an arrow back up between rooms: procfs imported internal/gpu, and
// internal/nvml imported procfs. So every room holds one layer, and
// the arrows between rooms run down or sideways, never round in a circle.
func TestNoArrowRunsUp(t *testing.T) {
	g := graph(t)
	of := layerOf()
	rank := map[string]int{}
	for i, l := range layers {
		rank[l.name] = i
	}
	for _, l := range layers {
		for _, imp := range l.imports {
			if rank[imp] > rank[l.name] {
				t.Errorf("the layer table lets %s import %s, a layer above it", l.name, imp)
			}
		}
	}
	for p, imps := range g {
		for _, imp := range imps {
			if lp, li := of[p], of[imp]; lp != "" && li != "" && rank[li] > rank[lp] {
				t.Errorf("%s (%s) imports %s (%s), a higher layer", p, lp, imp, li)
			}
		}
	}
	roomLayer := map[string]string{}
	roomPkg := map[string]string{}
	for _, p := range slices.Sorted(maps.Keys(g)) {
		r, l := room(p), of[p]
		if l == "" {
			continue
		}
		if prev, ok := roomLayer[r]; ok && prev != l {
			t.Errorf("directory %s holds packages of two layers: %s (%s) and %s (%s); give the sources a directory of their own", r, roomPkg[r], prev, p, l)
			continue
		}
		roomLayer[r], roomPkg[r] = l, p
	}
	arrows := map[string]map[string]string{} // room -> room -> an import that draws the arrow
	for p, imps := range g {
		for _, imp := range imps {
			if a, b := room(p), room(imp); a != b {
				if arrows[a] == nil {
					arrows[a] = map[string]string{}
				}
				arrows[a][b] = p + " -> " + imp
			}
		}
	}
	if c := circle(arrows); c != nil {
		var why []string
		for i := range len(c) - 1 {
			why = append(why, arrows[c[i]][c[i+1]])
		}
		t.Errorf("the directories import each other round a circle %s (%s): an arrow runs back up", strings.Join(c, " -> "), strings.Join(why, "; "))
	}
}

// room is the directory a package's tree hangs from: internal/X or cmd/X
// (python and other top-level packages are rooms of their own).
func room(p string) string {
	parts := strings.SplitN(p, "/", 3)
	if len(parts) >= 2 && (parts[0] == "internal" || parts[0] == "cmd") {
		return parts[0] + "/" + parts[1]
	}
	return parts[0]
}

// circle returns a cycle of the graph (its first node repeated at the end),
// or nil.
func circle(g map[string]map[string]string) []string {
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var found []string
	var visit func(string) bool
	visit = func(n string) bool {
		state[n] = open
		stack = append(stack, n)
		for _, m := range slices.Sorted(maps.Keys(g[n])) {
			switch state[m] {
			case open:
				i := slices.Index(stack, m)
				found = append(append([]string(nil), stack[i:]...), m)
				return true
			case unseen:
				if visit(m) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return false
	}
	for _, n := range slices.Sorted(maps.Keys(g)) {
		if state[n] == unseen && visit(n) {
			return found
		}
	}
	return nil
}

// TestNoLayerReachesAForbiddenOne checks the closure too, with the
// sentences the design states: probes import no judge, renderers import no
// probe, judgement imports no reader.
func TestNoLayerReachesAForbiddenOne(t *testing.T) {
	g := graph(t)
	of := layerOf()
	for p := range g {
		deps := closure(g, p)
		for _, d := range deps {
			switch lp, ld := of[p], of[d]; {
			case lp == "sources" && (ld == "derive" || ld == "judge" || ld == "render" || ld == "pipeline"):
				t.Errorf("source %s reaches %s (%s)", p, d, ld)
			case (lp == "render" || lp == "judge" || lp == "derive") && ld == "sources":
				t.Errorf("%s %s reaches the source %s", lp, p, d)
			case lp != "testing" && ld == "testing":
				t.Errorf("%s reaches the test helper %s", p, d)
			}
		}
	}
}

func closure(g map[string][]string, p string) []string {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(q string) {
		for _, d := range g[q] {
			if !seen[d] {
				seen[d] = true
				walk(d)
			}
		}
	}
	walk(p)
	var out []string
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

var (
	archPath  = filepath.Join("..", "..", "docs", "ARCHITECTURE.md")
	tableRow  = regexp.MustCompile("(?m)^\\| `([^`]+)` \\|")
	beginMark = "<!-- import graph: generated by go test ./internal/layers -update; do not edit -->\n"
	endMark   = "<!-- end of import graph -->\n"
)

// TestArchitectureDocIsTheCode checks that docs/ARCHITECTURE.md's package
// table names every package and nothing else, and that its import graph is
// the one the code has (go test ./internal/layers -update rewrites it).
func TestArchitectureDocIsTheCode(t *testing.T) {
	g := graph(t)
	b, err := os.ReadFile(archPath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	listed := map[string]bool{}
	for _, m := range tableRow.FindAllStringSubmatch(doc, -1) {
		listed[m[1]] = true
		if _, ok := g[m[1]]; !ok {
			t.Errorf("docs/ARCHITECTURE.md lists %s, which is not a package", m[1])
		}
	}
	for p := range g {
		if !listed[p] {
			t.Errorf("docs/ARCHITECTURE.md's package table does not list %s", p)
		}
	}
	i, j := strings.Index(doc, beginMark), strings.Index(doc, endMark)
	if i < 0 || j < i {
		t.Fatalf("docs/ARCHITECTURE.md has no generated import graph between %q and %q", beginMark, endMark)
	}
	want := doc[:i+len(beginMark)] + render(g) + doc[j:]
	golden.Check(t, archPath, want)
}

// render writes the graph: which layers each layer imports, then each
// package's direct imports, layer by layer, top down.
func render(g map[string][]string) string {
	of := layerOf()
	var b strings.Builder
	b.WriteString("```\n")
	for i := len(layers) - 1; i >= 0; i-- {
		l := layers[i]
		uses := map[string]bool{}
		for _, p := range l.pkgs {
			for _, d := range g[p] {
				if of[d] != l.name {
					uses[of[d]] = true
				}
			}
		}
		var u []string
		for _, o := range layers {
			if uses[o.name] {
				u = append(u, o.name)
			}
		}
		fmt.Fprintf(&b, "%-10s -> %s\n", l.name, strings.Join(orNone(u), ", "))
	}
	b.WriteString("\n")
	for i := len(layers) - 1; i >= 0; i-- {
		l := layers[i]
		fmt.Fprintf(&b, "%s:\n", l.name)
		pkgs := append([]string(nil), l.pkgs...)
		slices.Sort(pkgs)
		for _, p := range pkgs {
			fmt.Fprintf(&b, "  %-27s -> %s\n", p, strings.Join(orNone(short(g[p])), " "))
		}
	}
	b.WriteString("```\n")
	return b.String()
}

func short(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strings.TrimPrefix(p, "internal/")
	}
	return out
}

func orNone(s []string) []string {
	if len(s) == 0 {
		return []string{"(nothing of gpufeed)"}
	}
	return s
}
