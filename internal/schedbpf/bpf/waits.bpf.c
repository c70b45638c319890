// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// Where a process's sleeping threads wait, read in the kernel: for each
// thread user space asks for (by tid, in `asked`), what
// /proc/PID/task/TID/syscall and wchan print, in one program run for the
// whole process instead of two file opens per thread (tens of µs each, most
// of a 1,000-thread job's first seconds under --sched bpf; see
// docs/PERFORMANCE.md).
//
//   - The system call: its number and six arguments from the thread's user
//     registers (task_pt_regs), as the kernel's collect_syscall reads them
//     (kernel/ptrace.c's task_current_syscall): orig_ax and di, si, dx, r10,
//     r8, r9 on x86-64; syscallno and orig_x0, x1..x5 on arm64. -1: blocked
//     outside a system call (a page fault).
//   - The wait channel: the first return address of the thread's kernel
//     stack outside the scheduler's and the locks' text, the address
//     get_wchan() gives (arch/x86/kernel/process.c's __get_wchan, with
//     in_sched_functions), named as /proc's wchan names it (%ps, the symbol
//     without offset). The text's bounds come from text_bounds, run once.
//   - A thread running, waking or queued, or one that changed state or ran
//     while it was read, is flagged running: /proc's syscall file says
//     "running" for it, and its wait is read on a later tick.
//
// The same program, in its other mode, reads a new thread's stat facts
// (struct thread_facts). One program reads both, a task iterator linked to
// the process's leader (one link per process), whose threads it looks up
// by tid.
//
// Its own object (bpf2go's "tw"): the kfuncs bpf_task_from_pid (6.2) and
// the numbers iterator (6.4), the helpers bpf_task_pt_regs (5.15) and
// bpf_kallsyms_lookup_name (5.16); a
// kernel or a policy without them fails this load alone, and the waits are
// read from /proc.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#include "task.h"
#include "iter.h"

#if defined(__TARGET_ARCH_x86)
struct pt_regs {
	unsigned long r10;
	unsigned long r9;
	unsigned long r8;
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
} __attribute__((preserve_access_index));
#define SC_NR(r) ((long)(r)->orig_ax)
#define SC_ARG(r, a)                                                                                                  \
	do {                                                                                                          \
		(a)[0] = (r)->di;                                                                                     \
		(a)[1] = (r)->si;                                                                                     \
		(a)[2] = (r)->dx;                                                                                     \
		(a)[3] = (r)->r10;                                                                                    \
		(a)[4] = (r)->r8;                                                                                     \
		(a)[5] = (r)->r9;                                                                                     \
	} while (0)
#elif defined(__TARGET_ARCH_arm64)
struct pt_regs {
	unsigned long long regs[31];
	unsigned long long orig_x0;
	int syscallno;
} __attribute__((preserve_access_index));
#define SC_NR(r) ((long)(r)->syscallno)
#define SC_ARG(r, a)                                                                                                  \
	do {                                                                                                          \
		(a)[0] = (r)->orig_x0;                                                                                \
		(a)[1] = (r)->regs[1];                                                                                \
		(a)[2] = (r)->regs[2];                                                                                \
		(a)[3] = (r)->regs[3];                                                                                \
		(a)[4] = (r)->regs[4];                                                                                \
		(a)[5] = (r)->regs[5];                                                                                \
	} while (0)
#else
#error "waits.bpf.c: no system call registers for this architecture"
#endif

// The flags of a wait record.
#define WAIT_RUNNING 1 // running, waking or queued: nothing read

// struct wait is one thread's wait, as /proc's syscall and wchan print it.
struct wait {
	u32 tid;
	u32 flags;
	long long nr; // -1: blocked outside a system call
	u64 args[6];
	char wchan[64]; // "" where the stack was not read
};

// The reading's cursor, as threads.bpf.c's.
struct wcursor {
	u32 next;
	u32 full;
	u32 mode;  // READ_WAITS or READ_FACTS, set by user space
	u32 count; // the tids in asked, set by user space
};

// What a reading writes for each thread asked: its wait (into waits) or its
// stat facts (into facts).
#define READ_WAITS 0
#define READ_FACTS 1

// The scheduler's and the locks' text ([start, end) each): a return
// address there is the sleep itself, not where the thread waits.
struct bounds {
	u64 sched_start;
	u64 sched_end;
	u64 lock_start;
	u64 lock_end;
};

#define WAITS 4096
#define FRAMES 16

// asked: the tids user space asks about (the cursor's count of them), set
// through the mapping before a run; 64 bits each, an array's element
// stride.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, WAITS);
	__type(key, u32);
	__type(value, u64);
} asked SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, WAITS);
	__type(key, u32);
	__type(value, struct wait);
} waits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct wcursor);
} wcursors SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct bounds);
} text SEC(".maps");

// names caches the wait channels named so far by address: most sleeping
// threads of a job wait at a handful of places (a pool's futex, its
// epoll), and naming one (%ps: a search of the kernel's symbols) costs more
// than the stack walk before it. A kernel address names the same function
// for the life of the kernel (a module's, until it is unloaded: a reading
// after that names it as the new owner of the address would).
struct wchan_name {
	char s[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, u64);
	__type(value, struct wchan_name);
} names SEC(".maps");

static __always_inline int in_sleep_text(struct bounds *b, u64 a)
{
	return (a >= b->sched_start && a < b->sched_end) || (a >= b->lock_start && a < b->lock_end);
}

static __always_inline int busy(struct task_struct *p)
{
	return p->__state == 0 || p->on_cpu || p->on_rq;
}

// struct thread_facts is what /proc/PID/task/TID/stat tells of a thread when it is
// first seen, raw: its name, its start (since boot, ns), its state and CPU,
// and the CPU times from which stat's utime and stime are computed
// (task_cputime_adjusted: utime and stime scaled to the run time, never
// below the last values given, prev_cputime); user space computes them.
struct thread_facts {
	u32 tid;
	u32 state; // __state | exit_state
	int cpu;
	u32 flags; // FACTS_NO_PREV: prev_cputime not in this kernel
	u64 start_boottime;
	u64 utime;
	u64 stime;
	u64 rtime;
	u64 prev_utime;
	u64 prev_stime;
	char comm[16];
};

#define FACTS_NO_PREV 1

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, WAITS);
	__type(key, u32);
	__type(value, struct thread_facts);
} facts SEC(".maps");

// read_wait writes where p waits into r: its system call and wait channel,
// or WAIT_RUNNING.
static __always_inline void read_wait(struct task_struct *p, struct wait *r, struct bounds *b)
{
	r->tid = p->pid;
	r->flags = 0;
	r->nr = -1;
	for (int k = 0; k < 6; k++)
		r->args[k] = 0;
	r->wchan[0] = 0;
	u32 state = p->__state;
	unsigned long switches = p->nvcsw + p->nivcsw;
	if (busy(p)) {
		r->flags = WAIT_RUNNING;
		return;
	}
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(p);
	if (regs) {
		r->nr = SC_NR(regs);
		if (r->nr != -1)
			SC_ARG(regs, r->args);
	}
	u64 ips[FRAMES];
	long len = bpf_get_task_stack(p, ips, sizeof(ips), 0);
	for (int k = 0; k < FRAMES; k++) {
		if (k * 8 >= len)
			break;
		u64 a = ips[k];
		if (in_sleep_text(b, a))
			continue;
		struct wchan_name *known = bpf_map_lookup_elem(&names, &a);
		if (known) {
			__builtin_memcpy(r->wchan, known->s, sizeof(r->wchan));
		} else {
			bpf_snprintf(r->wchan, sizeof(r->wchan), "%ps", &a, sizeof(a));
			bpf_map_update_elem(&names, &a, r->wchan, BPF_ANY);
		}
		break;
	}
	if (busy(p) || p->__state != state || p->nvcsw + p->nivcsw != switches)
		r->flags = WAIT_RUNNING;
}

// read_facts writes p's stat facts into r.
static __always_inline void read_facts(struct task_struct *p, struct thread_facts *r)
{
	r->tid = p->pid;
	r->state = p->__state | (u32)p->exit_state;
	r->cpu = task_cpu(p);
	r->flags = 0;
	r->start_boottime = p->start_boottime;
	r->utime = p->utime;
	r->stime = p->stime;
	r->rtime = p->se.sum_exec_runtime;
	r->prev_utime = 0;
	r->prev_stime = 0;
	if (bpf_core_field_exists(p->prev_cputime)) {
		r->prev_utime = p->prev_cputime.utime;
		r->prev_stime = p->prev_cputime.stime;
	} else {
		r->flags = FACTS_NO_PREV;
	}
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), p->comm);
}

// proc_asked writes, for each thread asked that is still one of the
// process's, its wait or its facts (the cursor's mode) from the cursor on.
// Each is looked up by its tid: walking the process's threads instead
// costs about 0.3 µs a thread, each task's memory cold between ticks (a
// 1,000-thread job's walk, about 280 µs, for the few active threads a
// slow tick finds asleep).
SEC("iter/task")
int proc_asked(struct bpf_iter__task *ctx)
{
	struct task_struct *leader = ctx->task;
	if (!leader)
		return 0;
	u32 zero = 0;
	struct wcursor *c = bpf_map_lookup_elem(&wcursors, &zero);
	struct bounds *b = bpf_map_lookup_elem(&text, &zero);
	if (!c || !b)
		return 0;
	int tgid = leader->tgid;
	u32 n = c->next;
	u32 mode = c->mode;
	u32 count = c->count;
	if (count > WAITS)
		count = WAITS;
	struct bpf_iter_num it;
	int *at;
	bpf_iter_num_new(&it, 0, count);
	while ((at = bpf_iter_num_next(&it))) {
		u32 k = *at;
		u64 *tid = bpf_map_lookup_elem(&asked, &k);
		if (!tid)
			break;
		struct task_struct *p = bpf_task_from_pid((int)*tid);
		if (!p)
			continue; // exited
		if (p->tgid != tgid) {
			bpf_task_release(p); // its tid now another process's
			continue;
		}
		u32 i = n;
		if (mode == READ_FACTS) {
			struct thread_facts *r = bpf_map_lookup_elem(&facts, &i);
			if (!r) {
				c->full = 1;
				bpf_task_release(p);
				break;
			}
			read_facts(p, r);
		} else {
			struct wait *r = bpf_map_lookup_elem(&waits, &i);
			if (!r) {
				c->full = 1;
				bpf_task_release(p);
				break;
			}
			read_wait(p, r, b);
		}
		bpf_task_release(p);
		n++;
	}
	bpf_iter_num_destroy(&it);
	c->next = n;
	return 0;
}

static const char sched_start[] = "__sched_text_start";
static const char sched_end[] = "__sched_text_end";
static const char lock_start[] = "__lock_text_start";
static const char lock_end[] = "__lock_text_end";

// text_bounds looks the sleep text's bounds up in the kernel's symbols
// (kallsyms_lookup_name: no /proc/kallsyms to read), run once at load.
SEC("syscall")
int text_bounds(void *ctx)
{
	u32 zero = 0;
	struct bounds *b = bpf_map_lookup_elem(&text, &zero);
	if (!b)
		return 1;
	if (bpf_kallsyms_lookup_name(sched_start, sizeof(sched_start), 0, &b->sched_start) ||
	    bpf_kallsyms_lookup_name(sched_end, sizeof(sched_end), 0, &b->sched_end) ||
	    bpf_kallsyms_lookup_name(lock_start, sizeof(lock_start), 0, &b->lock_start) ||
	    bpf_kallsyms_lookup_name(lock_end, sizeof(lock_end), 0, &b->lock_end))
		return 1;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
