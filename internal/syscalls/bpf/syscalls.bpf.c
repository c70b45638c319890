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

// A row of strace -c's table: one thread's calls of one syscall. The key
// is 8 bytes (the shortest hash); the thread's process is in the row.
struct key {
	u32 tid;
	u32 nr;
};

struct stat {
	u64 calls;
	u64 errors;
	u64 ns;
	u64 max_ns;
	u32 tgid;
	u32 pad;
	char comm[16]; // the thread's name when its row was made
};

// A thread's syscall in progress (ts 0: none).
struct start {
	u32 tid; // the slot's owner (0: free); in the starts hash, unused
	u32 nr;
	u64 ts;
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

// The watched processes, as a bitmap over every possible tgid
// (PID_MAX_LIMIT, 4194304 on 64-bit: 512 KiB of words): the first test of
// every syscall of the host, an array element (the verifier inlines its
// lookup: no helper call, no hash) and a bit. gpufeed sets bits in
// `user`, the fork program in `forked` (atomically), so neither
// overwrites the other's.
struct watch {
	u64 user;
	u64 forked;
};

#define WATCH_WORDS (4194304 / 64)

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WATCH_WORDS);
	__type(key, u32);
	__type(value, struct watch);
} watched SEC(".maps");

// The watched processes, for the summary's list of pids (not read per
// syscall).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 8192);
	__type(key, u32);   // tgid
	__type(value, u32); // 1
} pids SEC(".maps");

// Per-thread slots for the call in progress, indexed by tid modulo
// SLOTS: a thread claims a free slot at its first watched syscall
// (compare-and-swap on the owner) and keeps it until it exits, so a call
// is one array element written at entry and read at exit, not a hash
// update. A thread whose slot another live thread holds uses the starts
// hash instead.
#define SLOTS 16384

// The slot index mask, SLOTS - 1; a test sets it to 0 at load (every
// thread in one slot) to drive the hash path.
const volatile u32 slot_mask = SLOTS - 1;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOTS);
	__type(key, u32);
	__type(value, struct start);
} slots SEC(".maps");

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
// row the full futexes map could not hold; [3]: threads whose slot
// another thread held (their calls went through the starts hash).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

static __always_inline void count(u32 i)
{
	u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline int is_watched(u32 tgid)
{
	u32 w = tgid / 64;
	struct watch *b = bpf_map_lookup_elem(&watched, &w);
	return b && ((b->user | b->forked) >> (tgid % 64)) & 1;
}

// watched_slot is the slot array's entry for the current thread when its
// process is watched (NULL otherwise), with the process's and the thread's
// ids in *tgid and *tid: the entry may be held by another thread whose id
// shares the slot (the caller checks s->tid).
static __always_inline struct start *watched_slot(u32 *tgid, u32 *tid)
{
	u64 id = bpf_get_current_pid_tgid();
	*tgid = id >> 32;
	if (!is_watched(*tgid))
		return NULL;
	*tid = (u32)id;
	u32 i = *tid & slot_mask;
	return bpf_map_lookup_elem(&slots, &i);
}

// sys_enter(struct pt_regs *regs, long id)
SEC("raw_tracepoint/sys_enter")
int sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	u32 tgid, tid;
	struct start *s = watched_slot(&tgid, &tid);
	if (!s)
		return 0;
	if (s->tid != tid) {
		if (s->tid != 0 || __sync_val_compare_and_swap(&s->tid, 0, tid) != 0) {
			// Held by another thread: this thread's calls go through the hash.
			s = bpf_map_lookup_elem(&starts, &tid);
			if (!s) {
				struct start zero = {};
				bpf_map_update_elem(&starts, &tid, &zero, BPF_NOEXIST);
				s = bpf_map_lookup_elem(&starts, &tid);
				if (!s)
					return 0;
				count(3);
			}
		}
	}
	long nr = ctx->args[1];
	u64 kind = 0, uaddr = 0;
	if (nr == NR_FUTEX || nr == NR_FUTEX_WAKE || nr == NR_FUTEX_WAIT) {
		const void *regs = (const void *)ctx->args[0];
		u64 op = 0;
		bpf_probe_read_kernel(&uaddr, sizeof(uaddr), regs + REG_ARG0);
		if (nr == NR_FUTEX) {
			bpf_probe_read_kernel(&op, sizeof(op), regs + REG_ARG1);
			switch (op & 127) { // FUTEX_CMD_MASK: the private and clock flags off
			case 0:  // FUTEX_WAIT
			case 6:  // FUTEX_LOCK_PI
			case 9:  // FUTEX_WAIT_BITSET
			case 11: // FUTEX_WAIT_REQUEUE_PI
			case 13: // FUTEX_LOCK_PI2
				kind = FUTEX_KIND_WAIT;
				break;
			case 1:  // FUTEX_WAKE
			case 3:  // FUTEX_REQUEUE
			case 4:  // FUTEX_CMP_REQUEUE
			case 5:  // FUTEX_WAKE_OP
			case 7:  // FUTEX_UNLOCK_PI
			case 10: // FUTEX_WAKE_BITSET
				kind = FUTEX_KIND_WAKE;
				break;
			}
		} else {
			kind = nr == NR_FUTEX_WAIT ? FUTEX_KIND_WAIT : FUTEX_KIND_WAKE;
		}
		if (!kind)
			uaddr = 0;
	}
	// Only this thread writes its slot or entry.
	s->nr = nr;
	s->kind = kind;
	s->uaddr = uaddr;
	s->ts = bpf_ktime_get_ns();
	return 0;
}

// sys_exit(struct pt_regs *regs, long ret)
SEC("raw_tracepoint/sys_exit")
int sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	u32 tgid, tid;
	struct start *s = watched_slot(&tgid, &tid);
	if (!s)
		return 0;
	if (s->tid != tid) {
		s = bpf_map_lookup_elem(&starts, &tid);
		if (!s)
			return 0; // no call entered in the window
	}
	if (!s->ts)
		return 0; // entered before the window
	u64 d = bpf_ktime_get_ns() - s->ts;
	s->ts = 0;
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
	struct key k = {.tid = tid, .nr = s->nr};
	long ret = (long)ctx->args[1];
	struct stat *st = bpf_map_lookup_elem(&stats, &k);
	if (!st) {
		struct stat zero = {.tgid = tgid};
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

// sched_process_exit(struct task_struct *p): the exiting thread's slot is
// freed and its hash entry goes (an exit or a thread killed inside a
// syscall never returns from it).
SEC("raw_tracepoint/sched_process_exit")
int thread_exit(struct bpf_raw_tracepoint_args *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32, tid = (u32)id;
	if (!is_watched(tgid))
		return 0;
	u32 i = tid & slot_mask;
	struct start *s = bpf_map_lookup_elem(&slots, &i);
	if (s && s->tid == tid) {
		s->ts = 0;
		__sync_val_compare_and_swap(&s->tid, tid, 0);
	}
	bpf_map_delete_elem(&starts, &tid);
	return 0;
}

// sched_process_fork(struct task_struct *parent, struct task_struct *child)
SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = BPF_CORE_READ(parent, tgid);
	if (!is_watched(ptgid))
		return 0;
	u32 ctgid = BPF_CORE_READ(child, tgid);
	if (ctgid == ptgid)
		return 0; // a thread: its process is watched already
	u32 w = ctgid / 64;
	struct watch *b = bpf_map_lookup_elem(&watched, &w);
	if (b)
		__sync_fetch_and_or(&b->forked, 1ULL << (ctgid % 64));
	u32 one = 1;
	bpf_map_update_elem(&pids, &ctgid, &one, BPF_ANY);
	count(1);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
