// Command testlog reads go test -json on stdin and writes what go test
// prints without -v: each package's ok or FAIL line, and the whole output of
// every test that failed (its subtests' too), followed by the slowest
// top-level tests with their times. scripts/test.sh runs the end-to-end
// package through it, so that a CI log says where the suite's time went.
// A stream from go tool test2json running a compiled test binary has no
// package line (go test writes it, not the binary): testlog writes it.
//
//	go test -json ./cmd/gpufeed | go run ./scripts/testlog -slowest 15
//
// Lines that are not JSON (a build error, a panic before the test binary
// speaks test2json) are printed as they come.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type testTime struct {
	pkg, name string
	sec       float64
	failed    bool
}

// summarise copies r's events to w as go test without -v would print
// them, then the slowest top-level tests; it says whether any test or
// package failed.
func summarise(r io.Reader, w io.Writer, slowest int) (failed bool, err error) {
	// Each top-level test's output, its subtests' included, in the order
	// it came; dropped once the test passed.
	type key struct{ pkg, test string }
	out := map[key][]string{}
	started := map[key]time.Time{}
	// Packages whose ok or FAIL line go test wrote.
	said := map[string]bool{}
	var times []testTime
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintln(w, string(line))
			continue
		}
		top, _, sub := strings.Cut(e.Test, "/")
		k := key{e.Package, top}
		switch {
		case e.Action == "build-output":
			// The compiler's errors for a package whose test binary
			// did not build (go test -json gives them as events).
			fmt.Fprint(w, e.Output)
		case e.Action == "output" && e.Test == "":
			// Package lines: ok, FAIL, a panic outside a test.
			if s := e.Output; !strings.HasPrefix(s, "=== ") && s != "PASS\n" {
				fmt.Fprint(w, s)
				if strings.HasPrefix(s, "ok  \t") || strings.HasPrefix(s, "FAIL\t") {
					said[e.Package] = true
				}
			}
		case e.Action == "output":
			if s := e.Output; !strings.HasPrefix(s, "=== RUN") && !strings.HasPrefix(s, "=== PAUSE") && !strings.HasPrefix(s, "=== CONT") {
				out[k] = append(out[k], s)
			}
		case (e.Action == "pass" || e.Action == "fail") && e.Test == "":
			failed = failed || e.Action == "fail"
			// A package that failed with tests unfinished (a timeout, a
			// crash): what those tests printed so far.
			for k, lines := range out {
				if k.pkg == e.Package {
					fmt.Fprintf(w, "-- %s did not finish; its output:\n%s", k.test, strings.Join(lines, ""))
					delete(out, k)
				}
			}
			// A test binary run by test2json (scripts/test.sh runs the
			// binaries it compiled first) has no go command to write the
			// package's line: it is written here, as go test writes it.
			if !said[e.Package] {
				status := "ok  "
				if e.Action == "fail" {
					status = "FAIL"
				}
				fmt.Fprintf(w, "%s\t%s\t%.3fs\n", status, e.Package, e.Elapsed)
			}
			delete(said, e.Package)
		case (e.Action == "run" || e.Action == "cont") && !sub:
			// A parallel test starts when it continues, not when it paused.
			started[k] = e.Time
		case e.Action == "skip" && !sub:
			// Skipped: go test without -v says nothing of it.
			delete(started, k)
			delete(out, k)
		case (e.Action == "pass" || e.Action == "fail") && !sub:
			// Wall time from its start to its end: a test's Elapsed leaves
			// out the parallel subtests it waits for after its function
			// returns.
			sec := e.Elapsed
			if t0, ok := started[k]; ok && !t0.IsZero() && e.Time.Sub(t0).Seconds() > sec {
				sec = e.Time.Sub(t0).Seconds()
			}
			delete(started, k)
			times = append(times, testTime{e.Package, e.Test, sec, e.Action == "fail"})
			if e.Action == "fail" {
				failed = true
				for _, s := range out[k] {
					fmt.Fprint(w, s)
				}
			}
			delete(out, k)
		}
	}
	if err := sc.Err(); err != nil {
		return true, err
	}
	if slowest > 0 && len(times) > 0 {
		sort.SliceStable(times, func(i, j int) bool { return times[i].sec > times[j].sec })
		// Over several packages each test is named with its package's
		// last element.
		several := false
		for _, t := range times {
			several = several || t.pkg != times[0].pkg
		}
		fmt.Fprintf(w, "-- the %d slowest tests (wall time, parallel ones overlapping others)\n", min(slowest, len(times)))
		for _, t := range times[:min(slowest, len(times))] {
			mark := ""
			if t.failed {
				mark = "  FAIL"
			}
			name := t.name
			if several {
				name = t.pkg[strings.LastIndex(t.pkg, "/")+1:] + "." + name
			}
			fmt.Fprintf(w, "%8.1fs  %s%s\n", t.sec, name, mark)
		}
	}
	return failed, nil
}

func main() {
	slowest := flag.Int("slowest", 15, "list this many of the slowest top-level tests (0: none)")
	flag.Parse()
	failed, err := summarise(os.Stdin, os.Stdout, *slowest)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testlog: reading go test -json:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}
