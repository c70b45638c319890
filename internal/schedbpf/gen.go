package schedbpf

// The BPF object is compiled from bpf/sched.bpf.c by bpf2go; its Go
// bindings and .o files are committed, so building needs no clang. To
// regenerate (clang 14 or later, libbpf's headers: apt-get install clang
// libbpf-dev): go generate ./internal/schedbpf, or
// scripts/bpf-generate.sh for every BPF package.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -target amd64,arm64 -type thread -type wkey -type wval -type watch sb bpf/sched.bpf.c

// The faster reader of the counters (bpf/threads.bpf.c, Linux 6.7 and
// later), its own object so that an older kernel fails this load alone.
// Its references to tasks are typed by a BTF type tag ("kptr"), which
// clang 14 does not emit: clang 16 (Debian 12: apt-get install clang-16).
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang-16 -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -target amd64,arm64 -no-global-types -type sched_counts -type cursor tc bpf/threads.bpf.c

// Where the threads wait (bpf/waits.bpf.c: the system call and the wait
// channel, read in the kernel for the threads asked), its own object too.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc clang -cflags "-O2 -g -Wall -Werror -mcpu=v3 -I/usr/include/x86_64-linux-gnu" -target amd64,arm64 -type wait -type wcursor -type bounds -type thread_facts tw bpf/waits.bpf.c
