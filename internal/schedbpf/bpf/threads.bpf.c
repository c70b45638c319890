// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The kernel's own per-thread scheduling counters of a process, all its
// threads in one program run: the faster reader of the counters (see
// counters.go). It is a task iterator linked to one task, the process's
// leader, whose program walks the leader's thread list itself with the
// task iterator kfuncs (Linux 6.7 and later) and writes one row per thread
// into `rows`, an array user space maps. The per-process task iterator of
// sched.bpf.c (counts) visits each thread as one iterator step, and each
// step looks the next thread up by pid again and reads its pid number:
// about twice the kernel's time for a 1,000-thread process, read cold
// every tick (docs/PERFORMANCE.md). The walk itself then waits on each
// task's list link in turn: the threads it found are held (slots) and read
// through their references while the process's threads stay the same.
// Where the kfuncs are missing, this object does not load and counts is
// used.
//
// Its own object (bpf2go's "tc"), so that a kernel without the kfuncs
// fails this load alone.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "task.h"
#include "iter.h"

// The reading's cursor: the next free row, whether a thread found no row
// (the reading is then incomplete), and how many processes were walked.
// User space zeroes it before a tick's runs; each process's run appends.
struct cursor {
	u32 next;
	u32 full;
	u32 walked; // the processes whose threads were walked, not read through the references
};

#define ROWS 65536

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, ROWS);
	__type(key, u32);
	__type(value, struct sched_counts);
} rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct cursor);
} cursors SEC(".maps");

// The threads a process's last walk found, each row's task held by a
// reference (a referenced kernel pointer: "kptr" in Linux 6.4 and later),
// and where the process's rows began and how many. While the process has
// as many threads as then and none has exited, the next reading reads the
// tasks through the references instead of walking the thread list: the
// walk follows each task's list link to find the next, one cold read after
// another (each task_struct is on its own pages, cold after a tick), where
// the references' reads do not wait on each other.
#define KPTR __attribute__((btf_type_tag("kptr")))

struct slot {
	struct task_struct KPTR *task;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ROWS);
	__type(key, u32);
	__type(value, struct slot);
} slots SEC(".maps");

struct span {
	u32 first;
	u32 count;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, u32); // the process's tgid
	__type(value, struct span);
} spans SEC(".maps");

// write_row writes p's counters into r.
static __always_inline void write_row(struct task_struct *p, struct sched_counts *r)
{
	r->tid = p->pid;
	r->tgid = p->tgid;
	r->state = p->__state | (u32)p->exit_state;
	r->cpu = task_cpu(p);
	r->run_ns = p->se.sum_exec_runtime;
	r->wait_ns = 0;
	r->slices = 0;
	if (bpf_core_field_exists(p->sched_info)) {
		r->wait_ns = p->sched_info.run_delay;
		r->slices = p->sched_info.pcount;
	}
	r->voluntary = p->nvcsw;
	r->involuntary = p->nivcsw;
}

// read_held writes the rows of the count threads of process tgid held
// from row first on, and says whether they are still the process's
// threads: none has exited (its list link may be gone), and each is held.
// With the thread count unchanged (the caller's check), a thread gone
// shows as one exited; a thread that exited ran since its row was written.
static __always_inline int read_held(u32 tgid, u32 first, u32 count)
{
	struct bpf_iter_num it;
	int *at;
	int ok = 1;
	bpf_iter_num_new(&it, 0, count);
	while ((at = bpf_iter_num_next(&it))) {
		u32 i = first + (u32)*at;
		struct slot *sl = bpf_map_lookup_elem(&slots, &i);
		struct sched_counts *r = bpf_map_lookup_elem(&rows, &i);
		if (!sl || !r) {
			ok = 0;
			break;
		}
		struct task_struct *p = sl->task;
		if (!p) {
			ok = 0;
			break;
		}
		// A thread asleep that has not run since its row was written
		// (for it: the row's process) keeps its row: the row's other
		// fields change only by running (the run time grows at every
		// switch-out and tick; the slices and the run-queue wait at a
		// switch-in; the switch counts at a switch-out; the exit state
		// by exiting), except the CPU, which a wake-up changes, the
		// thread then reading as running. Two of the task's cache lines
		// read instead of six.
		u32 state = p->__state;
		if (state != 0 && r->tgid == tgid && r->state == state && r->run_ns == p->se.sum_exec_runtime)
			continue;
		if (p->exit_state) {
			ok = 0;
			break;
		}
		write_row(p, r);
	}
	bpf_iter_num_destroy(&it);
	return ok;
}

SEC("iter/task")
int proc_counts(struct bpf_iter__task *ctx)
{
	struct task_struct *leader = ctx->task;
	if (!leader)
		return 0;
	u32 zero = 0;
	struct cursor *c = bpf_map_lookup_elem(&cursors, &zero);
	if (!c)
		return 0;
	u32 n = c->next;
	u32 tgid = leader->tgid;
	u32 nr = leader->signal->nr_threads;
	struct span *sp = bpf_map_lookup_elem(&spans, &tgid);
	if (sp && sp->first == n && sp->count == nr && nr > 0 && read_held(tgid, n, nr)) {
		c->next = n + nr;
		return 0;
	}
	struct bpf_iter_task it;
	struct task_struct *p;
	c->walked++;
	bpf_iter_task_new(&it, leader, ITER_PROC_THREADS);
	while ((p = bpf_iter_task_next(&it))) {
		u32 i = n;
		struct sched_counts *r = bpf_map_lookup_elem(&rows, &i);
		struct slot *sl = bpf_map_lookup_elem(&slots, &i);
		if (!r || !sl) {
			c->full = 1;
			break;
		}
		// Trusted task pointers: the fields are read directly
		// (relocated by CO-RE).
		write_row(p, r);
		struct task_struct *held = bpf_task_acquire(p);
		if (held) {
			held = bpf_kptr_xchg(&sl->task, held);
			if (held)
				bpf_task_release(held);
		}
		n++;
	}
	bpf_iter_task_destroy(&it);
	struct span got = {.first = c->next, .count = n - c->next};
	bpf_map_update_elem(&spans, &tgid, &got, BPF_ANY);
	c->next = n;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
