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
// every tick (docs/PERFORMANCE.md). Where the kfuncs are missing, this
// object does not load and counts is used.
//
// Its own object (bpf2go's "tc"), so that a kernel without the kfuncs
// fails this load alone.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "task.h"
#include "iter.h"

// The reading's cursor: the next free row, and whether a thread found no
// row (the reading is then incomplete). User space zeroes it before a
// tick's runs; each process's run appends.
struct cursor {
	u32 next;
	u32 full;
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
	struct bpf_iter_task it;
	struct task_struct *p;
	bpf_iter_task_new(&it, leader, ITER_PROC_THREADS);
	while ((p = bpf_iter_task_next(&it))) {
		u32 i = n;
		struct sched_counts *r = bpf_map_lookup_elem(&rows, &i);
		if (!r) {
			c->full = 1;
			break;
		}
		// Trusted task pointers: the fields are read directly
		// (relocated by CO-RE).
		r->tid = p->pid;
		r->tgid = p->tgid;
		r->state = p->__state | (u32)p->exit_state;
		r->cpu = -1;
		if (bpf_core_field_exists(p->cpu))
			r->cpu = p->cpu;
		else if (bpf_core_field_exists(p->thread_info.cpu))
			r->cpu = p->thread_info.cpu;
		r->run_ns = p->se.sum_exec_runtime;
		r->wait_ns = 0;
		r->slices = 0;
		if (bpf_core_field_exists(p->sched_info)) {
			r->wait_ns = p->sched_info.run_delay;
			r->slices = p->sched_info.pcount;
		}
		r->voluntary = p->nvcsw;
		r->involuntary = p->nivcsw;
		n++;
	}
	bpf_iter_task_destroy(&it);
	c->next = n;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
