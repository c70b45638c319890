#!/usr/bin/env bash
# The fast deterministic loop (`make check`): gofmt, vet, staticcheck, then
# every test that needs no live process or real window, under -short:
# parsers on fixtures and real samples, rules on recordings, goldens, fuzz
# seeds, the layer test. The live tests (real jobs observed for real
# windows, the simulated device, Prometheus, Chromium, tmux, podman) skip
# under -short through one gate, internal/livetest; `make test` runs them.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_CFLAGS="${CGO_CFLAGS:--O2 -g -Wno-deprecated-declarations}"
# As make test builds (scripts/test.sh): the two share the build cache,
# whatever the checkout's directory.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-trimpath"

scripts/lint.sh

printf '\n== go test -short\n'
go test -short -count=1 ./...

# The deployment files decoded into the Kubernetes and Prometheus Operator
# types (a module of its own); helm's own lint runs in make test.
printf '\n== deploy/validate\n'
(cd deploy/validate && go vet ./... && go test -short -count=1 ./...)
