package main

import (
	"runtime/debug"
	"testing"
)

// describeVersion says the version and the commit from what the build
// stamped: go build's vcs settings, go install's module version, or make
// build's -ldflags.
func TestDescribeVersion(t *testing.T) {
	vcs := func(rev, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: modified}}}
	}
	for _, tc := range []struct {
		version, commit string
		info            *debug.BuildInfo
		want            string
	}{
		{"dev", "", vcs("8bd986b76f6a951fe49673d2a129f6e91010a6ac", "false"),
			"dev (commit 8bd986b76f6a951fe49673d2a129f6e91010a6ac, 2026-12-01T10:00:00Z, go1.26.0)"},
		{"dev", "", vcs("8bd986b76f6a951fe49673d2a129f6e91010a6ac", "true"),
			"dev (commit 8bd986b76f6a951fe49673d2a129f6e91010a6ac with uncommitted changes, 2026-12-01T10:00:00Z, go1.26.0)"},
		{"dev", "", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"}},
			"v0.3.0 (no commit recorded: built outside a git checkout or with -buildvcs=false; make build records it, go1.26.0)"},
		{"v0.3.0-4-g8bd986b", "8bd986b76f6a951fe49673d2a129f6e91010a6ac", &debug.BuildInfo{GoVersion: "go1.26.0"},
			"v0.3.0-4-g8bd986b (commit 8bd986b76f6a951fe49673d2a129f6e91010a6ac, go1.26.0)"},
		{"dev", "", nil, "dev (no commit recorded: built outside a git checkout or with -buildvcs=false; make build records it)"},
	} {
		if got := describeVersion(tc.version, tc.commit, tc.info); got != tc.want {
			t.Errorf("describeVersion(%q, %q):\n got %q\nwant %q", tc.version, tc.commit, got, tc.want)
		}
	}
}
