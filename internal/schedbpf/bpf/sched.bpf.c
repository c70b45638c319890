// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// Per-thread scheduling of a set of processes, counted in the kernel on
// the scheduler's tracepoints (BTF-typed: tp_btf: sched_switch,
// sched_waking, sched_wakeup_new, sched_process_exit, sched_process_fork): time on CPU, time
// runnable on a run queue (woken, or preempted, until switched in: what
// /proc/PID/task/TID/schedstat calls run_delay), voluntary and
// involuntary switches, time in uninterruptible sleep (D), and who wakes
// whom. The processes are the tgids in the `watched` bitmap; a
// sched_process_fork program adds each child of a watched process.
//
// User space reads `threads` once per tick (a batch lookup) instead of two
// /proc files per thread.
//
// Regenerate with go generate (see gen.go); the generated Go and .o files
// are committed so that building needs no clang.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

typedef _Bool bool;

#include "task.h"

// Kernels before 5.14 call the field `state` (a long).
struct task_struct___old {
	long state;
} __attribute__((preserve_access_index));

// One watched thread. The counters are cumulative from the program's
// attach (or the thread's birth); the *_since fields are the state in
// progress (0: not in it), which user space adds up to its reading time.
struct thread {
	u32 tgid;
	u32 cpu;         // the CPU it was last switched in on
	u64 run_ns;      // on CPU, completed slices
	u64 wait_ns;     // runnable on a run queue, completed waits
	u64 dsleep_ns;        // in uninterruptible sleep, completed
	u64 slices;      // switched in
	u64 voluntary;   // switched out asleep
	u64 involuntary; // switched out still runnable (preempted, yielded)
	u64 wakeups;     // woken (sched_waking)
	u64 oncpu_since;
	u64 queued_since;
	u64 dsleep_since;
	u32 last_state; // the task state it was last switched out in
	u32 exited;     // 1: sched_process_exit ran for it
	u32 seeded;     // 1: made by the seed iterator (its state is known)
	// The wake-up edge in progress: the thread that woke it last, its
	// process and name, and how many wake-ups in a row it made, not yet
	// added to `wakers` (a waker wakes the same thread over and over: a
	// hash lookup and an atomic add a wake-up cost more than the rest of
	// the program). waker_gen counts the times the edge moved to
	// `wakers`, so that user space can tell a reading that raced a move.
	u32 waker;
	u64 waker_count;
	u64 waker_gen;
	u32 waker_tgid;
	char waker_comm[16];
};

// A wake-up edge: the watched thread woken, and the thread whose context
// woke it (for a wake-up from an interrupt, the thread the interrupt came
// in on).
struct wkey {
	u32 wakee;
	u32 waker;
};

struct wval {
	u64 count;
	u32 waker_tgid;
	u32 pad;
	char comm[16]; // the waker's name at its first wake-up
};

// The watched processes as a bitmap over every possible tgid, as in the
// syscall summary: an array element and a bit per test.
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

// The threads' rows; sized at load (Options.MaxThreads).
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, u32); // tid
	__type(value, struct thread);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, struct wkey);
	__type(value, struct wval);
} wakers SEC(".maps");

// [0]: threads whose row the full threads map could not hold; [1]:
// children added by the fork program; [2]: wake-ups whose edge the full
// wakers map could not hold; [3]: switch-outs with no switch-in seen
// before them (a slice the program did not see begin).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, u32);
	__type(value, u64);
} counters SEC(".maps");

// Set at load: the kernel's sched_switch carries prev_state as its 4th
// argument (5.18 and later); before, the state is read from the task.
const volatile u32 state_arg = 1;

#define TASK_RUNNING 0
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_NOLOAD 0x400 // with UNINTERRUPTIBLE: TASK_IDLE, shown as I
#define TASK_DEAD 0x80

static __always_inline void count_n(u32 i, u64 n)
{
	u64 *c = bpf_map_lookup_elem(&counters, &i);
	if (c)
		__sync_fetch_and_add(c, n);
}

static __always_inline void count(u32 i)
{
	count_n(i, 1);
}

static __always_inline int is_watched(u32 tgid)
{
	u32 w = tgid / 64;
	struct watch *b = bpf_map_lookup_elem(&watched, &w);
	return b && ((b->user | b->forked) >> (tgid % 64)) & 1;
}

// row is tid's row, made when missing.
static __always_inline struct thread *row(u32 tid, u32 tgid)
{
	struct thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (t)
		return t;
	struct thread zero = {.tgid = tgid};
	bpf_map_update_elem(&threads, &tid, &zero, BPF_NOEXIST);
	t = bpf_map_lookup_elem(&threads, &tid);
	if (!t)
		count(0);
	return t;
}

static __always_inline u32 task_state(struct task_struct *p)
{
	if (bpf_core_field_exists(p->__state))
		return BPF_CORE_READ(p, __state);
	struct task_struct___old *o = (void *)p;
	return (u32)BPF_CORE_READ(o, state);
}

// The clock is read only for a switch that involves a watched thread:
// every switch of the host runs this program, and most involve none.
static __always_inline void on_switch(struct task_struct *prev, struct task_struct *next, u32 prev_state, int preempt)
{
	u64 now = 0;
	u32 tgid = prev->tgid;
	if (tgid && is_watched(tgid)) {
		now = bpf_ktime_get_ns();
		// A dying task's last switch (TASK_DEAD) makes no row: user space
		// may have read and deleted its row since its exit.
		u32 tid = prev->pid;
		struct thread *t = prev_state & TASK_DEAD ? bpf_map_lookup_elem(&threads, &tid) : row(tid, tgid);
		if (t) {
			if (t->oncpu_since) {
				if (now > t->oncpu_since)
					t->run_ns += now - t->oncpu_since;
			} else if (!(t->seeded && !t->slices && !t->voluntary && !t->involuntary)) {
				// Switched out with no switch-in seen since its last
				// switch-out: under load the kernel now and then runs
				// the program for a thread's switch-out and not for the
				// switch-in before it (a few in a thousand, with no
				// recursion miss counted). That slice's CPU time is
				// lost, and the wait it ended is unknown: dropped
				// rather than stretched over the slice.
				count(3);
				t->queued_since = 0;
			}
			t->oncpu_since = 0;
			t->last_state = prev_state;
			// The kernel's own rule (__schedule): a switch is
			// voluntary when the task leaves the CPU to sleep, not
			// preempted; otherwise it stays on the run queue.
			if (!preempt && prev_state != TASK_RUNNING) {
				t->voluntary++;
				if ((prev_state & TASK_UNINTERRUPTIBLE) && !(prev_state & TASK_NOLOAD))
					t->dsleep_since = now;
			} else {
				t->involuntary++;
				t->queued_since = now;
			}
		}
	}
	tgid = next->tgid;
	if (tgid && is_watched(tgid)) {
		if (!now)
			now = bpf_ktime_get_ns();
		struct thread *t = row(next->pid, tgid);
		if (t) {
			if (t->queued_since && now > t->queued_since)
				t->wait_ns += now - t->queued_since;
			t->queued_since = 0;
			if (t->dsleep_since) { // woken without a wake-up seen (attached mid-sleep)
				if (now > t->dsleep_since)
					t->dsleep_ns += now - t->dsleep_since;
				t->dsleep_since = 0;
			}
			t->oncpu_since = now;
			t->slices++;
			t->cpu = bpf_get_smp_processor_id();
		}
	}
}

// sched_switch(bool preempt, struct task_struct *prev, struct task_struct
// *next, unsigned int prev_state): prev_state from 5.18.
SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	u32 prev_state;
	if (state_arg)
		prev_state = (u32)ctx[3];
	else
		prev_state = task_state(prev);
	on_switch(prev, next, prev_state, preempt);
	return 0;
}

// The wakee is on a run queue from here until it is switched in. Counted
// from sched_waking (try_to_wake_up's start), not sched_wakeup (the
// enqueue): one program a wake-up instead of two, at the cost of counting
// as run-queue wait the moments a wake-up on another CPU takes to enqueue
// (the kernel's run_delay starts at the enqueue).
static __always_inline void enqueued(struct thread *t)
{
	u64 now = bpf_ktime_get_ns();
	if (t->dsleep_since) {
		if (now > t->dsleep_since)
			t->dsleep_ns += now - t->dsleep_since;
		t->dsleep_since = 0;
	}
	if (!t->oncpu_since && !t->queued_since)
		t->queued_since = now;
}

// A new task is queued at its first wake-up (sched_waking does not fire
// for it).
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	u32 tgid = p->tgid;
	if (!is_watched(tgid))
		return 0;
	struct thread *t = row(p->pid, tgid);
	if (t)
		enqueued(t);
	return 0;
}

// edge adds n wake-ups of wakee by waker to `wakers`; comm is the waker's
// name (NULL: the current task's, the waker's own context).
static __always_inline void edge(u32 wakee, u32 waker, u32 waker_tgid, const char *comm, u64 n)
{
	struct wkey k = {.wakee = wakee, .waker = waker};
	struct wval *v = bpf_map_lookup_elem(&wakers, &k);
	if (!v) {
		struct wval zero = {.waker_tgid = waker_tgid};
		if (comm)
			__builtin_memcpy(zero.comm, comm, sizeof(zero.comm));
		else
			bpf_get_current_comm(zero.comm, sizeof(zero.comm));
		bpf_map_update_elem(&wakers, &k, &zero, BPF_NOEXIST);
		v = bpf_map_lookup_elem(&wakers, &k);
		if (!v) {
			count_n(2, n);
			return;
		}
	}
	__sync_fetch_and_add(&v->count, n);
}

// flush moves a row's edge in progress to `wakers`.
static __always_inline void flush(u32 tid, struct thread *t)
{
	if (!t->waker_count)
		return;
	edge(tid, t->waker, t->waker_tgid, t->waker_comm, t->waker_count);
	t->waker_count = 0;
	t->waker_gen++;
}

// sched_waking runs in the waker's context (try_to_wake_up), unlike
// sched_wakeup, which may run on the wakee's CPU: the edge is made here.
// It runs under the wakee's pi_lock (try_to_wake_up), so two wakers of one
// thread do not update its row at once. A wake-up by the thread's last
// waker adds to its row; another waker moves the row's edge to `wakers`
// and takes its place.
SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	u32 tgid = p->tgid;
	if (!is_watched(tgid))
		return 0;
	u64 id = bpf_get_current_pid_tgid();
	u32 tid = p->pid, waker = (u32)id;
	struct thread *t = row(tid, tgid);
	if (!t) {
		edge(tid, waker, id >> 32, 0, 1);
		return 0;
	}
	t->wakeups++;
	enqueued(t);
	if (t->waker_count && t->waker == waker) {
		t->waker_count++;
		return 0;
	}
	flush(tid, t);
	t->waker = waker;
	t->waker_tgid = id >> 32;
	bpf_get_current_comm(t->waker_comm, sizeof(t->waker_comm));
	t->waker_count = 1;
	return 0;
}

// sched_process_exit(struct task_struct *p): the row stays until user
// space has read it (it deletes exited rows after reading them).
SEC("tp_btf/sched_process_exit")
int BPF_PROG(thread_exit, struct task_struct *p)
{
	u32 tgid = p->tgid;
	if (!is_watched(tgid))
		return 0;
	u32 tid = p->pid;
	struct thread *t = row(tid, tgid);
	if (t) {
		flush(tid, t); // user space deletes the row once it has read it
		t->exited = 1;
	}
	return 0;
}

// sched_process_fork(struct task_struct *parent, struct task_struct *child)
SEC("tp_btf/sched_process_fork")
int BPF_PROG(fork, struct task_struct *parent, struct task_struct *child)
{
	u32 ptgid = parent->tgid;
	if (!is_watched(ptgid))
		return 0;
	u32 ctgid = child->tgid;
	if (ctgid == ptgid)
		return 0; // a thread: its process is watched already
	u32 w = ctgid / 64;
	struct watch *b = bpf_map_lookup_elem(&watched, &w);
	if (b)
		__sync_fetch_and_or(&b->forked, 1ULL << (ctgid % 64));
	count(1);
	return 0;
}

// watched_task is a task iterator's task when its process is watched, else
// NULL (the iterator's end, or another process's thread).
static __always_inline struct task_struct *watched_task(struct bpf_iter__task *ctx)
{
	struct task_struct *p = ctx->task;
	if (!p || !p->tgid || !is_watched(p->tgid))
		return 0;
	return p;
}

// A task iterator user space runs after watching a process: it gives each
// of the process's threads that has no row yet one that says what the
// thread is doing now (on a CPU, on a run queue, in D, asleep), so that a
// thread already running when it was watched, and not switched out since
// (a spinning thread alone on its CPU), is counted from now rather than
// from its next switch-in.
SEC("iter/task")
int seed(struct bpf_iter__task *ctx)
{
	struct task_struct *p = watched_task(ctx);
	if (!p)
		return 0;
	u32 tgid = p->tgid;
	u32 tid = p->pid;
	if (bpf_map_lookup_elem(&threads, &tid))
		return 0;
	u64 now = bpf_ktime_get_ns();
	u32 state = task_state(p);
	struct thread t = {.tgid = tgid, .last_state = state, .seeded = 1};
	if (p->on_cpu)
		t.oncpu_since = now;
	else if (p->on_rq)
		t.queued_since = now;
	else if ((state & TASK_UNINTERRUPTIBLE) && !(state & TASK_NOLOAD))
		t.dsleep_since = now;
	if (bpf_map_update_elem(&threads, &tid, &t, BPF_NOEXIST) && !bpf_map_lookup_elem(&threads, &tid))
		count(0);
	return 0;
}

// A task iterator user space runs every tick, each run a read of every
// watched thread's counters: one system call for a process's threads where
// /proc costs a pread per thread, and no program on the scheduler's path
// (a program on sched_switch costs the job on every context switch). The
// link is made per process where the kernel allows it (6.1 and later: the
// walk visits that process's threads only), else over every task of the
// host, which the watched bitmap filters.
SEC("iter/task")
int counts(struct bpf_iter__task *ctx)
{
	struct task_struct *p = watched_task(ctx);
	if (!p)
		return 0;
	u32 tgid = p->tgid;
	// The iterator's task is a trusted BTF pointer: its fields are read
	// directly (relocated by CO-RE), not through bpf_probe_read_kernel.
	struct sched_counts c = {
		.tid = p->pid,
		.tgid = tgid,
		.state = task_state(p) | (u32)p->exit_state,
		.cpu = task_cpu(p),
		.run_ns = p->se.sum_exec_runtime,
		.voluntary = p->nvcsw,
		.involuntary = p->nivcsw,
	};
	if (bpf_core_field_exists(p->sched_info)) {
		c.wait_ns = p->sched_info.run_delay;
		c.slices = p->sched_info.pcount;
	}
	bpf_seq_write(ctx->meta->seq, &c, sizeof(c));
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
