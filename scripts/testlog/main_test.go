package main

import (
	"io"
	"os"
	"strings"
	"testing"
)

// A real go test -json stream (testdata/go-test.json: a package with a
// passing test that logs, a slow one, a failing subtest beside a passing
// one, two parallel tests, one failing, and one whose two subtests run in
// parallel): what the failed tests said is
// printed in order, nothing of the passing ones, then the slowest.
func TestSummarise(t *testing.T) {
	f, err := os.Open("testdata/go-test.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := summariseFailed(t, f, 2)
	for _, want := range []string{
		"    m_test.go:16: want 2, got 3\n--- FAIL: TestBroken/wrong (0.00s)\n--- FAIL: TestBroken (0.00s)\n",
		"    m_test.go:21: B fails\n--- FAIL: TestParallelB (0.10s)\n",
		"FAIL\texample.com/m\t0.906s\n",
		// TestParallelSubtests' own Elapsed is 0: its two parallel
		// subtests of 0.5 s run after its function returns.
		"-- the 2 slowest tests (wall time, parallel ones overlapping others)\n     0.5s  TestParallelSubtests\n     0.3s  TestSlow\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	for _, never := range []string{"quiet when it passes", "A logs", "=== RUN", "TestQuick"} {
		if strings.Contains(got, never) {
			t.Errorf("output has %q:\n%s", never, got)
		}
	}
}

// A package that timed out: its test never ended, so what it printed is
// shown when the package fails; a line that is not JSON passes through.
func TestSummariseUnfinished(t *testing.T) {
	in := `build output that is not JSON
{"Action":"run","Package":"p","Test":"TestHang"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"=== RUN   TestHang\n"}
{"Action":"output","Package":"p","Test":"TestHang","Output":"    p_test.go:9: waiting\n"}
{"Action":"output","Package":"p","Output":"panic: test timed out after 1s\n"}
{"Action":"fail","Package":"p","Elapsed":1}
`
	got := summariseFailed(t, strings.NewReader(in), 5)
	want := "build output that is not JSON\npanic: test timed out after 1s\n-- TestHang did not finish; its output:\n    p_test.go:9: waiting\nFAIL\tp\t1.000s\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// A test binary that did not build: go test -json gives the compiler's
// errors as build-output events (Go 1.26's stream, as it came); they are
// printed, and the package fails. Over two packages the slowest tests are
// named with their package.
func TestSummariseBuildFailure(t *testing.T) {
	in := `{"ImportPath":"example.com/bf [example.com/bf.test]","Action":"build-output","Output":"# example.com/bf [example.com/bf.test]\n"}
{"ImportPath":"example.com/bf [example.com/bf.test]","Action":"build-output","Output":"./bf_test.go:3:40: cannot use \"s\" (untyped string constant) as int value in variable declaration\n"}
{"ImportPath":"example.com/bf [example.com/bf.test]","Action":"build-fail"}
{"Time":"2026-12-04T11:59:59.037145668Z","Action":"start","Package":"example.com/bf"}
{"Time":"2026-12-04T11:59:59.037291345Z","Action":"output","Package":"example.com/bf","Output":"FAIL\texample.com/bf [build failed]\n"}
{"Time":"2026-12-04T11:59:59.037300162Z","Action":"fail","Package":"example.com/bf","Elapsed":0,"FailedBuild":"example.com/bf [example.com/bf.test]"}
{"Action":"run","Package":"example.com/ok","Test":"TestA"}
{"Action":"pass","Package":"example.com/ok","Test":"TestA","Elapsed":2}
{"Action":"run","Package":"example.com/other/x","Test":"TestB"}
{"Action":"pass","Package":"example.com/other/x","Test":"TestB","Elapsed":1}
`
	got := summariseFailed(t, strings.NewReader(in), 5)
	want := "# example.com/bf [example.com/bf.test]\n./bf_test.go:3:40: cannot use \"s\" (untyped string constant) as int value in variable declaration\n" +
		"FAIL\texample.com/bf [build failed]\n" +
		"-- the 2 slowest tests (wall time, parallel ones overlapping others)\n     2.0s  ok.TestA\n     1.0s  x.TestB\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// A compiled test binary run by go tool test2json -t -p (a real stream,
// as it came): no go command wrote the package's FAIL or ok line, so
// testlog writes it as go test would. A skipped test's output is not
// printed (it was, as a test that "did not finish").
func TestSummariseTest2JSON(t *testing.T) {
	in := `{"Time":"2026-12-04T12:20:36.89582888Z","Action":"start","Package":"example.com/t2j"}
{"Time":"2026-12-04T12:20:36.902849242Z","Action":"run","Package":"example.com/t2j","Test":"TestOK"}
{"Time":"2026-12-04T12:20:36.902964942Z","Action":"output","Package":"example.com/t2j","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Time":"2026-12-04T12:20:36.913445926Z","Action":"output","Package":"example.com/t2j","Test":"TestOK","Output":"--- PASS: TestOK (0.01s)\n"}
{"Time":"2026-12-04T12:20:36.913504778Z","Action":"pass","Package":"example.com/t2j","Test":"TestOK","Elapsed":0.01}
{"Time":"2026-12-04T12:20:36.913635356Z","Action":"run","Package":"example.com/t2j","Test":"TestBad"}
{"Time":"2026-12-04T12:20:36.913638993Z","Action":"output","Package":"example.com/t2j","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Time":"2026-12-04T12:20:36.913789589Z","Action":"output","Package":"example.com/t2j","Test":"TestBad","Output":"    t_test.go:4: why\n"}
{"Time":"2026-12-04T12:20:36.91382158Z","Action":"output","Package":"example.com/t2j","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Time":"2026-12-04T12:20:36.913849654Z","Action":"fail","Package":"example.com/t2j","Test":"TestBad","Elapsed":0}
{"Time":"2026-12-04T12:20:36.913927371Z","Action":"output","Package":"example.com/t2j","Output":"FAIL\n"}
{"Time":"2026-12-04T12:20:36.91507276Z","Action":"fail","Package":"example.com/t2j","Elapsed":0.019}
{"Time":"2026-12-04T12:20:37.0Z","Action":"start","Package":"example.com/ok"}
{"Time":"2026-12-04T12:20:37.01Z","Action":"run","Package":"example.com/ok","Test":"TestWriteSeeds"}
{"Time":"2026-12-04T12:20:37.02Z","Action":"output","Package":"example.com/ok","Test":"TestWriteSeeds","Output":"    c_test.go:226: set WRITE_SEEDS=1 to rewrite the seeds\n"}
{"Time":"2026-12-04T12:20:37.03Z","Action":"output","Package":"example.com/ok","Test":"TestWriteSeeds","Output":"--- SKIP: TestWriteSeeds (0.00s)\n"}
{"Time":"2026-12-04T12:20:37.04Z","Action":"skip","Package":"example.com/ok","Test":"TestWriteSeeds","Elapsed":0}
{"Time":"2026-12-04T12:20:37.1Z","Action":"output","Package":"example.com/ok","Output":"PASS\n"}
{"Time":"2026-12-04T12:20:37.2Z","Action":"pass","Package":"example.com/ok","Elapsed":0.2}
`
	got := summariseFailed(t, strings.NewReader(in), 0)
	want := "    t_test.go:4: why\n--- FAIL: TestBad (0.00s)\nFAIL\nFAIL\texample.com/t2j\t0.019s\nok  \texample.com/ok\t0.200s\n"
	if got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func FuzzSummarise(f *testing.F) {
	b, err := os.ReadFile("testdata/go-test.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(b))
	f.Add("{\"Action\":\"fail\",\"Package\":\"p\"}\n{")
	f.Fuzz(func(t *testing.T, in string) {
		var w strings.Builder
		if _, err := summarise(strings.NewReader(in), &w, 3); err != nil && !strings.Contains(err.Error(), "token too long") {
			t.Fatal(err)
		}
	})
}

// summariseFailed runs summarise over r, whose stream holds a failure, and
// returns what it printed.
func summariseFailed(t *testing.T, r io.Reader, slowest int) string {
	t.Helper()
	var b strings.Builder
	failed, err := summarise(r, &b, slowest)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	return b.String()
}
