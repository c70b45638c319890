# The README's two commands. go-nvml's cgo stubs reference NVML functions its
# header marks deprecated; C compilers warn about each on the first build, so
# those warnings (and only those) are silenced here.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

.PHONY: demo check test build

# Build, then diagnose the default built-in scenario on a simulated GPU.
demo:
	go run ./cmd/gpufeed demo

# The fast deterministic loop: gofmt, vet, staticcheck and every test that
# needs no live process (go test -short): a few minutes.
check:
	scripts/check.sh

# The whole test suite (what CI runs): the same, plus the live end-to-end
# tests once each and the race detector on the concurrent packages.
test:
	scripts/test.sh

# The version (git describe) and the commit go into the binary: gpufeed -V
# prints them (go build records the commit itself only in a plain clone).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)

build:
	go build -trimpath -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o gpufeed ./cmd/gpufeed

# The node agent's image (Containerfile), with podman or docker: from
# Debian's packages and the module proxy where no registry is reachable.
# IMAGE defaults to gpufeed-agent:<the chart's appVersion>, the image the
# manifests and the chart name.
.PHONY: image
image:
	scripts/image.sh
