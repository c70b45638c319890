// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The open-coded task iterator's kfuncs (Linux 6.7 and later), for the
// programs that walk one process's threads themselves (threads.bpf.c,
// waits.bpf.c).

#ifndef SCHEDBPF_ITER_H
#define SCHEDBPF_ITER_H

// Its opaque state (kernel/bpf/task_iter.c) and kinds (enum
// bpf_iter_task_type in the kernel).
struct bpf_iter_task {
	u64 __opaque[3];
} __attribute__((aligned(8)));

#define ITER_PROC_THREADS 2

extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task, unsigned int flags) __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __ksym;

#endif
