package driverprobe

// The BPF object is compiled from bpf/driver.bpf.c by bpf2go; its Go
// bindings and .o files are committed, so building needs no clang. To
// regenerate (clang 14 or later, libbpf's headers: apt-get install clang
// libbpf-dev): go generate ./internal/driverprobe, or
// scripts/bpf-generate.sh for every BPF package.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -I/usr/include/x86_64-linux-gnu" -target amd64,arm64 -type stat -type key dp bpf/driver.bpf.c
