// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// The kernel types both of schedbpf's objects read (sched.bpf.c and
// threads.bpf.c): only the fields used, relocated by CO-RE, and the record
// the counters' readers write.

#ifndef SCHEDBPF_TASK_H
#define SCHEDBPF_TASK_H

typedef unsigned int u32;
typedef unsigned long long u64;

struct sched_entity {
	u64 sum_exec_runtime;
} __attribute__((preserve_access_index));

struct sched_info {
	unsigned long pcount;
	unsigned long long run_delay;
} __attribute__((preserve_access_index));

struct thread_info {
	unsigned int cpu; // x86, and where task_struct has no cpu
} __attribute__((preserve_access_index));

struct prev_cputime {
	u64 utime;
	u64 stime;
} __attribute__((preserve_access_index));

struct signal_struct {
	int nr_threads;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	int pid;
	int tgid;
	unsigned int __state;
	int exit_state;
	int on_cpu;
	int on_rq;
	unsigned int cpu; // arm64 and others since 5.16
	struct sched_entity se;
	struct sched_info sched_info;
	unsigned long nvcsw;
	unsigned long nivcsw;
	u64 utime;
	u64 stime;
	struct prev_cputime prev_cputime;
	u64 start_boottime;
	char comm[16];
	struct signal_struct *signal;
} __attribute__((preserve_access_index));

// task_cpu is the CPU the task last ran on, as the kernel's task_cpu():
// task_struct's cpu (arm64 and others since 5.16) or thread_info's (x86);
// -1 where neither is found. The includer includes bpf_core_read.h.
static __always_inline int task_cpu(struct task_struct *p)
{
	if (bpf_core_field_exists(p->cpu))
		return p->cpu;
	if (bpf_core_field_exists(p->thread_info.cpu))
		return p->thread_info.cpu;
	return -1;
}

struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
} __attribute__((preserve_access_index));

// One watched thread as the kernel's scheduler counts it: the record the
// counts iterator writes. The fields are the task's own, the ones
// /proc/PID/task/TID/schedstat and status print (sum_exec_runtime,
// sched_info.run_delay and pcount, nvcsw and nivcsw), maintained by the
// scheduler whatever is attached: reading them costs the job nothing.
struct sched_counts {
	u32 tid;
	u32 tgid;
	u32 state; // __state | exit_state, as /proc's state letter reads it
	int cpu;   // the CPU it last ran on (task_cpu); -1 where not found
	u64 run_ns;
	u64 wait_ns;
	u64 slices;
	u64 voluntary;
	u64 involuntary;
};

#endif
