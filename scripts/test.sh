#!/usr/bin/env bash
# The whole test suite: what CI runs (.ci/run) and the README's second command.
# It installs what it needs (staticcheck) and fails on the first red step.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
# go-nvml's cgo stubs call NVML functions its header marks deprecated: one C
# warning each on a fresh build, none of them ours.
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"

step() { printf '\n== %s\n' "$*"; }

step "gofmt"
unformatted=$(gofmt -l $(git ls-files -co --exclude-standard '*.go'))
if [ -n "$unformatted" ]; then
	printf 'not gofmt-formatted:\n%s\n' "$unformatted"
	exit 1
fi

step "go vet"
go vet ./...

step "staticcheck"
if ! command -v staticcheck >/dev/null; then
	go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
fi
staticcheck ./...

step "go build"
go build -o /dev/null ./cmd/gpufeed

step "go test"
go test -count=1 ./...

# The race detector runs on the packages where goroutines share state.
race_pkgs=$(go list ./internal/... | grep -E '/(sample|gpu|trace/kineto)($|/)' || true)
if [ -n "$race_pkgs" ]; then
	step "go test -race (concurrent packages)"
	go test -count=1 -race $race_pkgs
fi
