#!/bin/sh
# Regenerates the committed BPF objects and their Go bindings (bpf2go) of
# every package that has a bpf/ directory of C sources. Building gpufeed
# needs neither clang nor this script; run it after changing a .bpf.c file.
#
# Needs clang (14 was used: Debian 12's clang-14 14.0.6), clang-16 for
# schedbpf's counters reader (its task references need BTF type tags, which
# clang 14 does not emit) and libbpf's headers: apt-get install clang
# clang-16 libbpf-dev.
set -eu
cd "$(dirname "$0")/.."
command -v clang >/dev/null || { echo "bpf-generate: clang is missing (apt-get install clang libbpf-dev)" >&2; exit 1; }
command -v clang-16 >/dev/null || { echo "bpf-generate: clang-16 is missing (apt-get install clang-16)" >&2; exit 1; }
[ -e /usr/include/bpf/bpf_helpers.h ] || { echo "bpf-generate: libbpf's headers are missing (apt-get install libbpf-dev)" >&2; exit 1; }
echo "bpf-generate: $(clang --version | head -1)"
for dir in $(find internal -type d -name bpf | sort); do
	pkg=$(dirname "$dir")
	echo "bpf-generate: $pkg"
	go generate "./$pkg"
done
