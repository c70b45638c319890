// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// CUDA driver calls of a set of processes, counted in the kernel by
// uprobes on the driver library's exported entry points (libcuda.so.1, or
// the simulated driver). One program serves every entry point: its attach
// cookie says which (the index in the Go side's table), which argument
// holds a byte count (a copy's or an allocation's size), and whether the
// return is probed too (the syncs, whose time inside is measured). An
// entry costs one hash update: launches are counted at entry only.
//
// Regenerate with go generate (see gen.go); the generated Go and .o files
// are committed so that building needs no clang.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#if defined(__TARGET_ARCH_x86)
#include <asm/ptrace.h>
#elif defined(__TARGET_ARCH_arm64)
// arm64's UAPI registers (asm/ptrace.h), the layout uprobes hand over.
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
#endif

typedef unsigned int u32;
typedef unsigned long long u64;

struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

// cookie: bits 0-15 the entry point's index, 16-19 the argument (1-based,
// 0: none) that holds a byte count, bit 20 a probe on the return.
#define COOKIE_INDEX(c) ((u32)((c) & 0xffff))
#define COOKIE_ARG(c) ((u32)(((c) >> 16) & 0xf))

struct key {
	u32 tgid;
	u32 tid;
	u32 index;
	u32 pad;
};

struct stat {
	u64 calls;
	u64 bytes;
	u64 ns;     // time inside (entry points probed on return too)
	u64 max_ns;
	char comm[16];
};

struct inside {
	u64 ts;
	u64 index;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, u32);
	__type(value, u32);
} pids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct key);
	__type(value, struct stat);
} stats SEC(".maps");

// The sync a thread is inside (syncs do not nest).
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 8192);
	__type(key, u32);
	__type(value, struct inside);
} insides SEC(".maps");

// [0]: calls whose row the full stats map could not hold; [1]: returns
// with no entry seen (entered before the window); [2]: children added.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 3);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

static __always_inline void count(u32 i)
{
	u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline struct stat *row(u32 tgid, u32 tid, u32 index)
{
	struct key k = {.tgid = tgid, .tid = tid, .index = index};
	struct stat *st = bpf_map_lookup_elem(&stats, &k);
	if (st)
		return st;
	struct stat zero = {};
	bpf_get_current_comm(zero.comm, sizeof(zero.comm));
	bpf_map_update_elem(&stats, &k, &zero, BPF_NOEXIST);
	st = bpf_map_lookup_elem(&stats, &k);
	if (!st)
		count(0);
	return st;
}

// on_call counts one entry of a probed entry point (and its byte count).
static __always_inline int on_call(struct pt_regs *ctx)
{
	// Both read first, at their fixed offsets: the verifier refuses a
	// load through a context pointer the compiler moved.
	u64 a2 = PT_REGS_PARM2(ctx), a3 = PT_REGS_PARM3(ctx);
	asm volatile("" ::: "memory");
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	if (!bpf_map_lookup_elem(&pids, &tgid))
		return 0;
	u64 c = bpf_get_attach_cookie(ctx);
	struct stat *st = row(tgid, tid, COOKIE_INDEX(c));
	if (!st)
		return 0;
	__sync_fetch_and_add(&st->calls, 1);
	u32 arg = COOKIE_ARG(c);
	u64 n = arg == 2 ? a2 : arg == 3 ? a3 : 0;
	if (n)
		__sync_fetch_and_add(&st->bytes, n);
	return 0;
}

// A sync's entry: counted, and its start kept for the return.
static __always_inline int on_sync_enter(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	if (!bpf_map_lookup_elem(&pids, &tgid))
		return 0;
	u64 c = bpf_get_attach_cookie(ctx);
	struct stat *st = row(tgid, tid, COOKIE_INDEX(c));
	if (st)
		__sync_fetch_and_add(&st->calls, 1);
	struct inside in = {.ts = bpf_ktime_get_ns(), .index = COOKIE_INDEX(c)};
	bpf_map_update_elem(&insides, &tid, &in, BPF_ANY);
	return 0;
}

static __always_inline int on_sync_exit(struct pt_regs *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct inside *in = bpf_map_lookup_elem(&insides, &tid);
	if (!in) {
		if (bpf_map_lookup_elem(&pids, &tgid))
			count(1);
		return 0;
	}
	u64 d = bpf_ktime_get_ns() - in->ts;
	u32 index = (u32)in->index;
	bpf_map_delete_elem(&insides, &tid);
	struct stat *st = row(tgid, tid, index);
	if (!st)
		return 0;
	__sync_fetch_and_add(&st->ns, d);
	if (d > st->max_ns)
		st->max_ns = d;
	return 0;
}

// One uprobe per entry point (the uprobe perf-event PMU): every kernel
// with attach cookies (5.15).
SEC("uprobe")
int call(struct pt_regs *ctx) { return on_call(ctx); }

SEC("uprobe")
int sync_enter(struct pt_regs *ctx) { return on_sync_enter(ctx); }

SEC("uretprobe")
int sync_exit(struct pt_regs *ctx) { return on_sync_exit(ctx); }

// One uprobe_multi link for a file's entry points (6.6 and later): the
// same programs, placed and removed together. Removing a probe waits for
// the kernel's grace periods (a tenth of a second and more on a virtual
// machine); the per-entry-point probes wait once each, a link once for all.
SEC("uprobe.multi")
int call_multi(struct pt_regs *ctx) { return on_call(ctx); }

SEC("uprobe.multi")
int sync_enter_multi(struct pt_regs *ctx) { return on_sync_enter(ctx); }

SEC("uretprobe.multi")
int sync_exit_multi(struct pt_regs *ctx) { return on_sync_exit(ctx); }

SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!bpf_map_lookup_elem(&pids, &ptgid))
		return 0;
	u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ctgid == ptgid)
		return 0;
	u32 one = 1;
	bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY);
	count(2);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
