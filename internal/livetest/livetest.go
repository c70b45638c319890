// Package livetest is the one gate of gpufeed's live tests: those that start
// real processes (jobs, the simulated device, Prometheus, a browser, a
// container) and observe them for real windows of seconds. Every such test
// calls Need first.
//
// `make check` runs `go test -short ./...`: the deterministic tests only
// (parsers on fixtures, rules on recordings, goldens, fuzz seeds), in a few
// minutes. `make test` runs everything: the live tests once each, and the
// race detector on the concurrent packages with -short, so that no live
// window is run twice.
package livetest

import "testing"

// Need skips a live test under -short.
func Need(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("live test (real processes observed for real windows): skipped by -short; make test runs it")
	}
}
