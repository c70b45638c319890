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

import (
	"errors"
	"syscall"
	"testing"
	"time"
)

// Need skips a live test under -short.
func Need(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("live test (real processes observed for real windows): skipped by -short; make test runs it")
	}
}

// WhileTextBusy calls start until it returns anything but ETXTBSY, for up
// to 2 s, and returns its last error. A test that writes an executable and
// runs it can be refused with "text file busy": another test's goroutine,
// running in parallel, may have forked a child that holds the file's
// descriptor (inherited while os.WriteFile had it open) until the child
// execs, a few milliseconds at most (Go issue 22315).
func WhileTextBusy(start func() error) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		err := start()
		if !errors.Is(err, syscall.ETXTBSY) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
