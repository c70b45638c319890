package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gpufeed/gpufeed/internal/derive"
	"github.com/gpufeed/gpufeed/internal/profile"
)

// repoRoot is where the goldens of every command live.
const repoRoot = "../.."

// compileSchema compiles docs/gpufeed.schema.json (draft 2020-12).
func compileSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(filepath.Join(repoRoot, "docs", "gpufeed.schema.json"))
	if err != nil {
		t.Fatalf("the schema does not compile: %v", err)
	}
	return s
}

// jsonGoldens are the JSON golden files of every command.
func jsonGoldens(t testing.TB) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"cmd/gpufeed/testdata/*.json", "testdata/check/golden/*.json", "testdata/golden/cli/*.json"} {
		m, err := filepath.Glob(filepath.Join(repoRoot, pattern))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

// snakeKey is a key of the contract: snake_case.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// badSuffix are unit suffixes the contract does not use: one suffix per
// kind (_ns, _bytes, _percent, _per_sec).
var badSuffix = regexp.MustCompile(`_(pct|us|ms|sec|secs|seconds|s|kb|mb)$`)

// checkKeys walks a document: every key snake_case with one unit suffix
// per kind, outside the maps whose keys are data (allowlisted environment
// variables, per-field reasons).
func checkKeys(t *testing.T, file string, v any, path string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if !snakeKey.MatchString(k) {
				t.Errorf("%s: key %s%s is not snake_case", file, path, k)
			}
			if badSuffix.MatchString(k) && !strings.HasSuffix(k, "_per_sec") {
				t.Errorf("%s: key %s%s: unit suffix outside the contract (_ns, _bytes, _percent)", file, path, k)
			}
			if k == "env" || k == "not_visible" && path != "" || k == "categories" && strings.HasPrefix(path, "cpu_profile.") {
				if _, ok := e.(map[string]any); ok {
					continue
				}
			}
			checkKeys(t, file, e, path+k+".")
		}
	case []any:
		for _, e := range x {
			checkKeys(t, file, e, path+"[].")
		}
	}
}

// TestJSONGoldensFollowTheContract validates every JSON golden of every
// command against the committed schema, and checks the rules a schema
// cannot say once for all keys: snake_case and one unit suffix per kind.
func TestJSONGoldensFollowTheContract(t *testing.T) {
	schema := compileSchema(t)
	files := jsonGoldens(t)
	commands := map[string]int{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Errorf("%s: not JSON: %v", f, err)
			continue
		}
		if err := schema.Validate(doc); err != nil {
			t.Errorf("%s does not follow docs/gpufeed.schema.json:\n%v", f, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err == nil {
			if c, ok := m["command"].(string); ok {
				commands[c]++
			}
			checkKeys(t, f, m, "")
			if res, ok := m["results"].([]any); ok {
				seen := map[string]bool{}
				for _, r := range res {
					id, _ := r.(map[string]any)["id"].(string)
					if seen[id] {
						t.Errorf("%s: result id %q is not unique", f, id)
					}
					seen[id] = true
				}
			}
		}
	}
	for _, c := range []string{"report", "check", "trace"} {
		if commands[c] == 0 {
			t.Errorf("no JSON golden of %s among %d files", c, len(files))
		}
	}
	t.Logf("%d JSON goldens: %v", len(files), commands)
}

// The schema rejects what the contract forbids: a test that could not
// fail would prove nothing.
func TestSchemaRejectsBreaches(t *testing.T) {
	schema := compileSchema(t)
	good := `{"schema_version":2,"command":"check","tool":"gpufeed","tool_version":"dev","hostname":null,"generated_at":"2026-01-01T00:00:00Z",
"root":null,"pid":null,"data_path":null,"gpu_source":null,"window_ns":0,"summary":{"fail":0,"warn":0,"error":0,"ok":1,"absent":0,"not_visible":0},
"exit_status":0,"results":[{"id":"a","check":"a","status":"ok","severity":"info","claim":"fine","evidence":[{"what":"x","value":1}]}]}`
	validate := func(s string) error {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return schema.Validate(doc)
	}
	if err := validate(good); err != nil {
		t.Fatalf("a valid document is rejected: %v", err)
	}
	for what, bad := range map[string]string{
		"no schema_version":     strings.Replace(good, `"schema_version":2,`, ``, 1),
		"a Go field name":       strings.Replace(good, `"exit_status":0`, `"exit_status":0,"ExitStatus":0`, 1),
		"a count left out":      strings.Replace(good, `"absent":0,`, ``, 1),
		"a dummy 0 beside text": strings.Replace(good, `{"what":"x","value":1}`, `{"what":"x","value":0,"text":"not recorded"}`, 1),
		"confidence as a share": `{"schema_version":2,"command":"trace","tool":"gpufeed","tool_version":"dev","hostname":null,"generated_at":"2026-01-01T00:00:00Z","reports":[{"verdict":{"class":"idle","confidence":0.5,"summary":"","because":[]}}],"multi_rank":null,"skipped":[]}`,
		"two results, one id":   strings.Replace(good, `"results":[`, `"results":[{"id":"a","check":"a","status":"ok","severity":"info","claim":"fine","evidence":[{"what":"x","value":1}]},`, 1),
	} {
		if err := validate(bad); err == nil {
			t.Errorf("%s: the schema accepts it", what)
		}
	}
}

// A diagnose report that carries a CPU profile (root, or CAP_PERFMON)
// follows the contract: the profile's entry, its always-present counts,
// and its category names (keys that are data).
func TestCPUProfileFollowsTheContract(t *testing.T) {
	schema := compileSchema(t)
	tl := hostile()
	tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateOn, FrequencyHz: 99, CPUs: 2, WindowNS: 4e9,
		Threads: []profile.ThreadCPU{{PID: 7, TID: 7, Comm: "python3", Samples: 100,
			Categories: map[profile.Category]int{profile.DriverSync: 75, profile.Interpreter: 25},
			Top: []profile.SymbolSamples{{Symbol: "cuStreamSynchronize", File: "libcuda.so.1", Category: profile.DriverSync, Samples: 75},
				{File: "libpython3.11.so.1.0", Category: profile.Interpreter, Samples: 25}}}}}
	r := Build(tl, derive.New(tl), nil, nil)
	r.Header.Command = "diagnose"
	out := jsonOf(t, r)
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(doc); err != nil {
		t.Errorf("a report with a CPU profile does not follow the schema:\n%v\n%s", err, out)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	p, ok := m["cpu_profile"].(map[string]any)
	if !ok {
		t.Fatalf("no cpu_profile:\n%s", out)
	}
	for _, k := range []string{"lost", "unresolved"} {
		if p[k] != float64(0) {
			t.Errorf("cpu_profile.%s is a documented count: want 0, got %v", k, p[k])
		}
	}
	checkKeys(t, "cpu_profile", m, "")
	// Not taken: absent (the notes say why), never an empty profile.
	tl.Meta.CPUProfile = &profile.CPUProfile{State: profile.StateUnavailable, Missing: "CAP_PERFMON"}
	if out := jsonOf(t, Build(tl, derive.New(tl), nil, nil)); bytes.Contains(out, []byte(`"cpu_profile"`)) {
		t.Errorf("an unavailable profile is written:\n%s", out)
	}
}
