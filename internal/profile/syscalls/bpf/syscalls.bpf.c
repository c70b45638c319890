// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// Syscall summary of a set of processes, aggregated in the kernel: per
// thread and syscall number, the calls, the failed calls and the time
// between entry and exit (wall clock, as strace -c -w and perf trace -s
// count it). Raw tracepoints on sys_enter/sys_exit: attached by name, they
// need no tracefs and no BTF. The processes are the tgids in `pids`; a
// BTF-typed sched_process_fork program adds each child of a watched
// process (a DataLoader worker), so the tree is followed as it grows.
//
// Regenerate with go generate (see gen.go); the generated Go and .o files
// are committed so that building needs no clang.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

typedef unsigned int u32;
typedef unsigned long long u64;

// Only the fields read, relocated against the running kernel's BTF.
struct task_struct {
	int pid;
	int tgid;
} __attribute__((preserve_access_index));

struct key {
	u32 tgid;
	u32 tid;
	u32 nr;
	u32 pad;
};

struct stat {
	u64 calls;
	u64 errors;
	u64 ns;
	u64 max_ns;
	char comm[16]; // the thread's name when its row was made
};

struct start {
	u64 ts;
	u64 nr;
	u64 uaddr; // a futex call's word (0: not a futex wait or wake)
	u64 kind;  // FUTEX_KIND_*
};

// A futex word's calls by one thread: the waits and the time inside them,
// the wakes. Who waits on whom is read from them: the threads that wait on
// a word and the ones that wake it.
struct fkey {
	u32 tgid;
	u32 tid;
	u64 uaddr;
	u32 kind;
	u32 pad;
};

struct fstat {
	u64 calls;
	u64 ns;
};

#define FUTEX_KIND_WAIT 1
#define FUTEX_KIND_WAKE 2

#if defined(__TARGET_ARCH_arm64)
#define NR_FUTEX 98
#define REG_ARG0 0 // struct user_pt_regs: regs[0]
#define REG_ARG1 8
#else
#define NR_FUTEX 202
#define REG_ARG0 112 // struct pt_regs: di
#define REG_ARG1 104 // si
#endif
#define NR_FUTEX_WAKE 454 // futex_wake(2), futex_wait(2): one number on every architecture
#define NR_FUTEX_WAIT 455

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, u32);   // tgid
	__type(value, u32); // 1
} pids SEC(".maps");

// A thread's syscall in progress (ts 0: none). One entry per thread,
// updated in place (no update or delete per call: the hot path is two
// lookups per syscall); a thread's entry goes when the thread exits
// (sched_process_exit).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, u32); // tid
	__type(value, struct start);
} starts SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, struct key);
	__type(value, struct stat);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct fkey);
	__type(value, struct fstat);
} futexes SEC(".maps");

// [0]: exits whose (thread, syscall) row the full stats map could not
// hold; [1]: children added by the fork program; [2]: futex calls whose
// row the full futexes map could not hold.
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

// sys_enter(struct pt_regs *regs, long id)
SEC("raw_tracepoint/sys_enter")
int sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	if (!bpf_map_lookup_elem(&pids, &tgid))
		return 0;
	long nr = ctx->args[1];
	struct start s = {.ts = bpf_ktime_get_ns(), .nr = nr};
	struct start *cur = bpf_map_lookup_elem(&starts, &tid);
	if (nr == NR_FUTEX || nr == NR_FUTEX_WAKE || nr == NR_FUTEX_WAIT) {
		const void *regs = (const void *)ctx->args[0];
		u64 uaddr = 0, op = 0;
		bpf_probe_read_kernel(&uaddr, sizeof(uaddr), regs + REG_ARG0);
		if (nr == NR_FUTEX) {
			bpf_probe_read_kernel(&op, sizeof(op), regs + REG_ARG1);
			switch (op & 127) { // FUTEX_CMD_MASK: the private and clock flags off
			case 0:  // FUTEX_WAIT
			case 6:  // FUTEX_LOCK_PI
			case 9:  // FUTEX_WAIT_BITSET
			case 11: // FUTEX_WAIT_REQUEUE_PI
			case 13: // FUTEX_LOCK_PI2
				s.kind = FUTEX_KIND_WAIT;
				break;
			case 1:  // FUTEX_WAKE
			case 3:  // FUTEX_REQUEUE
			case 4:  // FUTEX_CMP_REQUEUE
			case 5:  // FUTEX_WAKE_OP
			case 7:  // FUTEX_UNLOCK_PI
			case 10: // FUTEX_WAKE_BITSET
				s.kind = FUTEX_KIND_WAKE;
				break;
			}
		} else {
			s.kind = nr == NR_FUTEX_WAIT ? FUTEX_KIND_WAIT : FUTEX_KIND_WAKE;
		}
		if (s.kind)
			s.uaddr = uaddr;
	}
	if (cur) {
		*cur = s; // only this thread writes its entry
		return 0;
	}
	bpf_map_update_elem(&starts, &tid, &s, BPF_ANY);
	return 0;
}

// sys_exit(struct pt_regs *regs, long ret)
SEC("raw_tracepoint/sys_exit")
int sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	struct start *s = bpf_map_lookup_elem(&starts, &tid);
	if (!s || !s->ts)
		return 0; // entered before the window, or not watched
	u64 d = bpf_ktime_get_ns() - s->ts;
	struct key k = {.tgid = tgid, .tid = tid, .nr = (u32)s->nr};
	if (s->kind) {
		struct fkey fk = {.tgid = tgid, .tid = tid, .uaddr = s->uaddr, .kind = (u32)s->kind};
		struct fstat *fs = bpf_map_lookup_elem(&futexes, &fk);
		if (!fs) {
			struct fstat zero = {};
			bpf_map_update_elem(&futexes, &fk, &zero, BPF_NOEXIST);
			fs = bpf_map_lookup_elem(&futexes, &fk);
		}
		if (fs) {
			fs->calls++;
			fs->ns += d;
		} else {
			count(2);
		}
	}
	s->ts = 0;
	long ret = (long)ctx->args[1];
	struct stat *st = bpf_map_lookup_elem(&stats, &k);
	if (!st) {
		struct stat zero = {};
		bpf_get_current_comm(zero.comm, sizeof(zero.comm));
		bpf_map_update_elem(&stats, &k, &zero, BPF_NOEXIST);
		st = bpf_map_lookup_elem(&stats, &k);
		if (!st) {
			count(0);
			return 0;
		}
	}
	// The row is this thread's alone (its tid is in the key), and a
	// thread runs on one CPU at a time: plain adds, no atomics.
	st->calls++;
	if (ret < 0 && ret >= -4095)
		st->errors++;
	st->ns += d;
	if (d > st->max_ns)
		st->max_ns = d;
	return 0;
}

// sched_process_exit(struct task_struct *p): the exiting thread's entry
// goes (an exit or a thread killed inside a syscall never returns from it).
SEC("raw_tracepoint/sched_process_exit")
int thread_exit(struct bpf_raw_tracepoint_args *ctx)
{
	u32 tid = (u32)bpf_get_current_pid_tgid();
	bpf_map_delete_elem(&starts, &tid);
	return 0;
}

// sched_process_fork(struct task_struct *parent, struct task_struct *child)
SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!bpf_map_lookup_elem(&pids, &ptgid))
		return 0;
	u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ctgid == ptgid)
		return 0; // a thread: its process is watched already
	u32 one = 1;
	bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY);
	count(1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
