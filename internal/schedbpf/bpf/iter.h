// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The open-coded task iterator's kfuncs (Linux 6.7 and later), for the
// programs that walk one process's threads themselves (threads.bpf.c), and
// the ones waits.bpf.c uses to read threads by tid.

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

// The open-coded numbers iterator (6.4) and the task references (6.2):
// waits.bpf.c looks threads up by tid, threads.bpf.c keeps references to
// the threads it read.
struct bpf_iter_num {
	u64 __opaque[1];
} __attribute__((aligned(8)));

extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym;

extern struct task_struct *bpf_task_from_pid(int pid) __ksym;
extern struct task_struct *bpf_task_acquire(struct task_struct *p) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

#endif
