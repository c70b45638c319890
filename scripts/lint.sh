#!/usr/bin/env bash
# gofmt, go vet and staticcheck over the module: the first steps of both
# `make check` (scripts/check.sh) and `make test` (scripts/test.sh).
# staticcheck is installed at a fixed version when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$(go env GOPATH)/bin:$PATH"
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
