/*
 * gpufeed's simulated CUDA driver (libgpufeed-simcuda.so).
 *
 * What it reproduces of a real driver, and why (docs/SIMDEV.md has it all,
 * with sources):
 *
 *   - A launch makes no system call. libcuda writes the command into a ring
 *     mapped into the process and rings a doorbell register, also mapped in
 *     (the CPU-side article of this project's domain notes, section 1). Here
 *     a launch spends its CPU cost as user-mode work, computes when the work
 *     starts and ends on its stream (start = max(now, the stream's last end);
 *     a copy also waits for its direction's copy engine, a word shared by
 *     every process in the device's shared memory), and appends one record
 *     to a ring in shared memory that the simulated device server reads on
 *     its own clock. Only when the ring is a quarter full does it tell the
 *     server (one non-blocking send), so a launch loop makes a system call
 *     every few thousand launches.
 *   - A stream holds at most max_pending (1024) unfinished operations; a
 *     launch into a full stream waits, as the driver's does.
 *   - A thread waits for the device as the context's scheduling flags say
 *     (CUDA Driver API, cuCtxCreate / cuDevicePrimaryCtxSetFlags; CUDA
 *     Runtime API, cudaSetDeviceFlags): SPIN reads the clock in user space
 *     until the work is done, YIELD calls sched_yield until then,
 *     BLOCKING_SYNC sleeps once in the kernel on the device's channel (the
 *     server answers at the end time, as the GPU's completion interrupt
 *     wakes a real driver's waiter), and AUTO spins when the process has no
 *     more active contexts than the system has logical processors, else
 *     yields.
 *   - A copy from pageable memory stages through a bounce buffer: the thread
 *     copies the bytes (real memcpy work) and returns when the copy is done;
 *     a copy from page-locked memory (cuMemHostAlloc, cuMemHostRegister) is
 *     asynchronous.
 *
 * Nothing here trusts the server's memory beyond the two shared regions it
 * hands over at registration, and the server trusts nothing it reads from
 * them (internal/sim validates every record).
 */
#define _GNU_SOURCE
#include "gpufeed_simcuda.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- protocol: must agree with internal/sim/wire ---- */

#define PROTOCOL_VERSION 2
#define FRAME 32
#define OP_HELLO 1
#define OP_WAIT 6
#define OP_NUDGE 7
#define ROLE_WORKLOAD 0
#define ROLE_WAITER 2
#define ROLE_QUERY 3

#define REG_MAGIC 0x52534647u  /* "GFSR" */
#define DEV_MAGIC 0x44534647u  /* "GFSD" */
#define RING_MAGIC 0x47534647u /* "GFSG" */
#define REG_SIZE 160
#define SHM_VERSION 1
#define DEV_ENGINE_OFF 64 /* two u64, a cache line apart */
#define RING_HEAD_OFF 64
#define RING_TAIL_OFF 128
#define RING_REC_OFF 256
#define REC_SIZE 32

#define KIND_KERNEL 0
#define KIND_H2D 1
#define KIND_D2H 2
#define KIND_D2D 3
#define REC_PINNED 1

/* Bounds shared with the server (internal/sim). */
#define MAX_OP_NS (3600LL * 1000000000LL)
#define MAX_COPY_BYTES (1ULL << 40)
#define MAX_STREAMS 4096
#define MAX_REC_COUNT 65535

/* ---- small helpers ---- */

static __thread char tls_err[512];

static CUresult fail(CUresult r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static CUresult fail(CUresult r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(tls_err, sizeof tls_err, fmt, ap);
	va_end(ap);
	return r;
}

static inline int64_t mono_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* the vDSO: no system call */
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static inline void put32(unsigned char *b, uint32_t v) { memcpy(b, &v, 4); }
static inline void put64(unsigned char *b, uint64_t v) { memcpy(b, &v, 8); }
static inline uint32_t get32(const unsigned char *b) { uint32_t v; memcpy(&v, b, 4); return v; }
static inline uint64_t get64(const unsigned char *b) { uint64_t v; memcpy(&v, b, 8); return v; }
static inline double getf64(const unsigned char *b) { double v; memcpy(&v, b, 8); return v; }

/* ---- the launch cost: calibrated user-mode work ---- */

static double g_iters_per_ns;
static volatile uint64_t g_sink;

static void burn_iters(uint64_t n)
{
	uint64_t x = g_sink | 1;
	for (uint64_t i = 0; i < n; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		__asm__ __volatile__("" : "+r"(x));
	}
	g_sink = x;
}

/* calibrate measures the work loop in this thread's CPU time (so that being
 * descheduled meanwhile does not change the answer) and keeps the fastest of
 * three rounds. */
static void calibrate(void)
{
	double best = 0;
	for (int round = 0; round < 3; round++) {
		uint64_t n = 1 << 14;
		for (;;) {
			int64_t t0 = thread_cpu_ns();
			burn_iters(n);
			int64_t used = thread_cpu_ns() - t0;
			if (used >= 1000000) {
				double rate = (double)n / (double)used;
				if (rate > best)
					best = rate;
				break;
			}
			n *= 2;
		}
	}
	g_iters_per_ns = best > 0 ? best : 1;
}

static inline void spend_ns(uint64_t ns)
{
	if (ns)
		burn_iters((uint64_t)((double)ns * g_iters_per_ns));
}

/* ---- objects ---- */

#define CTX_MAGIC 0x43545853u
#define STREAM_MAGIC 0x5354524du
#define EVENT_MAGIC 0x45564e54u
#define MOD_MAGIC 0x4d4f4455u
#define FUNC_MAGIC 0x46554e43u
#define GRAPH_MAGIC 0x47524150u
#define GEXEC_MAGIC 0x47455843u

struct server {
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int devices;
	/* primary contexts, one per ordinal, and their flags */
	struct CUctx_st **primary;
	unsigned int *primary_flags;
};

struct node { /* one captured operation */
	uint8_t kind, pinned;
	int64_t dur;
	uint64_t bytes;
};

struct CUgraph_st {
	uint32_t magic;
	struct node *nodes;
	size_t n, cap;
};

struct CUgraphExec_st {
	uint32_t magic;
	struct CUctx_st *ctx;
	struct node *nodes;
	size_t n;
};

struct CUstream_st {
	uint32_t magic;
	struct CUctx_st *ctx;
	uint32_t id;
	unsigned int flags;
	int64_t last_end;
	/* end times of the unfinished operations, oldest first (a ring) */
	int64_t *ends;
	uint32_t head, count;
	struct CUgraph_st *capture; /* non-NULL while capturing */
	struct CUstream_st *next;
};

struct alloc {
	CUdeviceptr ptr;
	size_t size;
};

struct CUctx_st {
	uint32_t magic;
	int dead; /* destroyed, or inherited across fork */
	const char *dead_why;
	int server;
	struct server *srv;
	int ordinal;
	unsigned int flags;
	int primary, refs;
	int sock;
	pthread_mutex_t sock_mu;
	unsigned char *dev;
	size_t dev_len;
	unsigned char *ring;
	size_t ring_len;
	uint32_t ring_cap;
	int pid;
	int devices;
	int64_t clock_offset;
	uint32_t max_pending;
	double bw[3];
	double pageable_factor;
	uint64_t launch_cost_ns;
	uint64_t mem_total;
	char name[64];

	pthread_mutex_t mu; /* streams, ring, allocations */
	struct CUstream_st null_stream;
	struct CUstream_st *streams;
	uint32_t next_stream;
	int nstreams;
	struct alloc *allocs;
	size_t nallocs, cap_allocs;
	uint64_t mem_used;
	CUdeviceptr next_ptr;
	unsigned char *staging;
	int64_t nudged_at; /* last nudge while the ring was full */
	struct CUctx_st *next_ctx;
};

struct func {
	char name[128];
	int has_duration;
};

struct CUmod_st {
	uint32_t magic;
	struct CUfunc_st *funcs;
	size_t n;
};

struct CUfunc_st {
	uint32_t magic;
	struct CUmod_st *mod;
	char name[128];
	int has_duration;
};

struct CUevent_st {
	uint32_t magic;
	unsigned int flags;
	struct CUctx_st *ctx;
	int recorded;
	int64_t time;
};

/* ---- library state ---- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_default = -1; /* the server cuInit found through GPUFEED_SIMDEV */
static struct server **g_servers; /* each allocated once, never freed */
static int g_nservers;
static struct CUctx_st *g_ctxs;
static atomic_int g_active_ctxs;
static long g_cpus = 1;

struct pinned {
	uintptr_t p;
	size_t n;
	int alloc; /* cuMemHostAlloc: munmap on free */
};
static pthread_mutex_t g_pin_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pinned *g_pins;
static size_t g_npins, g_cap_pins;

/* The calling thread's context stack (cuCtxPush/Pop; the top is current). */
#define CTX_STACK 16
static __thread struct CUctx_st *tls_ctx[CTX_STACK];
static __thread int tls_depth;

/* The calling thread's connections for blocking waits, one per server. */
struct waiter {
	int server;
	int fd;
	uint64_t seq;
	struct waiter *next;
};
static __thread struct waiter *tls_waiters;
static pthread_key_t g_waiter_key;

static void close_waiters(void *p)
{
	struct waiter *w = p;
	while (w) {
		struct waiter *n = w->next;
		if (w->fd >= 0)
			close(w->fd);
		free(w);
		w = n;
	}
}

static void kill_ctx(struct CUctx_st *c, const char *why)
{
	if (c->dead)
		return;
	c->dead = 1;
	c->dead_why = why;
	if (c->sock >= 0)
		close(c->sock);
	c->sock = -1;
	if (c->ring)
		munmap(c->ring, c->ring_len);
	if (c->dev)
		munmap(c->dev, c->dev_len);
	c->ring = c->dev = NULL;
	atomic_fetch_sub(&g_active_ctxs, 1);
}

/* After fork the child is a process of its own: what the parent registered
 * is not the child's (its device channel and rings belong to the parent's
 * registration), so every inherited context is dead in the child, and the
 * child may initialise afresh. */
static void atfork_prepare(void) { pthread_mutex_lock(&g_mu); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void atfork_child(void)
{
	pthread_mutex_init(&g_mu, NULL);
	pthread_mutex_init(&g_pin_mu, NULL);
	for (struct CUctx_st *c = g_ctxs; c; c = c->next_ctx) {
		pthread_mutex_init(&c->mu, NULL);
		pthread_mutex_init(&c->sock_mu, NULL);
		if (!c->dead) {
			/* the parent's mappings stay the parent's: only drop ours */
			kill_ctx(c, "the context belongs to the parent process (forked after it was created)");
		}
	}
	atomic_store(&g_active_ctxs, 0);
	for (int i = 0; i < g_nservers; i++)
		for (int d = 0; d < g_servers[i]->devices; d++)
			g_servers[i]->primary[d] = NULL;
	close_waiters(tls_waiters);
	tls_waiters = NULL;
	pthread_setspecific(g_waiter_key, NULL);
	/* The thread's current context stays: using it answers
	 * CUDA_ERROR_NOT_INITIALIZED, as CUDA does in a forked child. */
}

static void lib_init(void)
{
	calibrate();
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	g_cpus = n > 0 ? n : 1;
	pthread_key_create(&g_waiter_key, close_waiters);
	pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static void ensure_lib(void) { pthread_once(&g_once, lib_init); }

/* ---- sockets ---- */

static int full_write(int fd, const void *b, size_t n)
{
	const char *p = b;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int full_read(int fd, void *b, size_t n)
{
	char *p = b;
	while (n) {
		ssize_t r = recv(fd, p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0) {
			errno = ECONNRESET;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int dial(const char *path)
{
	struct sockaddr_un a;
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof a.sun_path) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(a.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static void frame(unsigned char *b, int op, int kind, uint32_t stream, int64_t ts, uint64_t arg, uint64_t seq)
{
	memset(b, 0, FRAME);
	b[0] = (unsigned char)op;
	b[2] = (unsigned char)kind;
	put32(b + 4, stream);
	put64(b + 8, (uint64_t)ts);
	put64(b + 16, arg);
	put64(b + 24, seq);
}

/* read_reply reads a reply header, and its payload into buf (at most cap
 * bytes kept, the rest discarded), receiving up to nfds descriptors. It
 * returns the status (0 ok), or -1 on a broken connection. */
static int read_reply(int fd, unsigned char *hdr, unsigned char *buf, size_t cap, size_t *plen, int *fds, int nfds)
{
	struct msghdr m;
	struct iovec iov;
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	memset(&m, 0, sizeof m);
	iov.iov_base = hdr;
	iov.iov_len = FRAME;
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf.b;
	m.msg_controllen = sizeof cbuf.b;
	ssize_t r;
	do
		r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r <= 0) {
		if (r == 0)
			errno = ECONNRESET;
		return -1;
	}
	int got = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			int *p = (int *)CMSG_DATA(c);
			for (int i = 0; i < n; i++) {
				if (got < nfds && fds)
					fds[got++] = p[i];
				else
					close(p[i]);
			}
		}
	}
	if (r < FRAME && full_read(fd, hdr + r, (size_t)(FRAME - r)) < 0)
		goto broken;
	uint32_t len = get32(hdr + 4);
	if (len > (16u << 20))
		goto broken;
	size_t keep = len < cap ? len : cap;
	if (keep && full_read(fd, buf, keep) < 0)
		goto broken;
	for (size_t rest = len - keep; rest;) {
		unsigned char sink[256];
		size_t k = rest < sizeof sink ? rest : sizeof sink;
		if (full_read(fd, sink, k) < 0)
			goto broken;
		rest -= k;
	}
	if (plen)
		*plen = keep;
	for (int i = got; i < nfds && fds; i++)
		fds[i] = -1;
	return hdr[1];
broken:
	for (int i = 0; i < got; i++)
		close(fds[i]);
	return -1;
}

/* query asks a server how many devices it has. */
static CUresult query(const char *path, int *devices)
{
	int fd = dial(path);
	if (fd < 0)
		return fail(CUDA_ERROR_NO_DEVICE, "simulated device at %s: %s (start one with `gpufeed simdev --socket %s`)", path, strerror(errno), path);
	unsigned char b[FRAME], hdr[FRAME], msg[256];
	size_t n = 0;
	frame(b, OP_HELLO, ROLE_QUERY, 0, mono_now(), PROTOCOL_VERSION, 1);
	int st = full_write(fd, b, FRAME) < 0 ? -1 : read_reply(fd, hdr, msg, sizeof msg - 1, &n, NULL, 0);
	close(fd);
	if (st < 0)
		return fail(CUDA_ERROR_NO_DEVICE, "simulated device at %s: the connection broke during the hello", path);
	if (st != 0) {
		msg[n] = 0;
		return fail(CUDA_ERROR_NO_DEVICE, "simulated device at %s: %s", path, (char *)msg);
	}
	uint64_t v = get64(hdr + 16);
	if (v < 1 || v > 4096)
		return fail(CUDA_ERROR_NO_DEVICE, "simulated device at %s: it announced %llu devices", path, (unsigned long long)v);
	*devices = (int)v;
	return CUDA_SUCCESS;
}

/* server_slot finds or adds a server; g_mu held. */
static CUresult server_slot(const char *path, int *slot)
{
	for (int i = 0; i < g_nservers; i++)
		if (strcmp(g_servers[i]->path, path) == 0) {
			*slot = i;
			return CUDA_SUCCESS;
		}
	if (strlen(path) >= sizeof g_servers[0]->path)
		return fail(CUDA_ERROR_INVALID_VALUE, "simulated device socket path too long: %s", path);
	if (g_nservers >= 32767)
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "too many simulated device servers in one process");
	int devices;
	CUresult r = query(path, &devices);
	if (r)
		return r;
	struct server **ns = realloc(g_servers, (size_t)(g_nservers + 1) * sizeof *ns);
	if (!ns)
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	g_servers = ns;
	struct server *s = calloc(1, sizeof *s);
	if (!s)
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	strcpy(s->path, path);
	s->devices = devices;
	s->primary = calloc((size_t)devices, sizeof *s->primary);
	s->primary_flags = calloc((size_t)devices, sizeof *s->primary_flags);
	if (!s->primary || !s->primary_flags) {
		free(s->primary);
		free(s->primary_flags);
		free(s);
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	}
	g_servers[g_nservers] = s;
	*slot = g_nservers++;
	return CUDA_SUCCESS;
}

static CUresult decode_device(CUdevice d, int *slot, int *ord)
{
	if (!g_nservers)
		return fail(CUDA_ERROR_NOT_INITIALIZED, "cuInit has not succeeded (GPUFEED_SIMDEV names the simulated device)");
	int s = (int)((unsigned)d >> 16), o = d & 0xffff;
	if (d < 0 || s >= g_nservers || o >= g_servers[s]->devices)
		return fail(CUDA_ERROR_INVALID_DEVICE, "no simulated device %d", d);
	*slot = s;
	*ord = o;
	return CUDA_SUCCESS;
}

/* ---- registration: a context is one registration with the server ---- */

static CUresult ctx_register(struct CUctx_st *c)
{
	const char *path = c->srv->path;
	int fd = dial(path);
	if (fd < 0)
		return fail(CUDA_ERROR_NO_DEVICE, "simulated device at %s: %s", path, strerror(errno));
	unsigned char b[FRAME], hdr[FRAME], reg[REG_SIZE + 1];
	size_t n = 0;
	int fds[2] = {-1, -1};
	frame(b, OP_HELLO, ROLE_WORKLOAD, (uint32_t)c->ordinal, mono_now(), PROTOCOL_VERSION, 1);
	int st = full_write(fd, b, FRAME) < 0 ? -1 : read_reply(fd, hdr, reg, REG_SIZE, &n, fds, 2);
	if (st != 0) {
		close(fd);
		for (int i = 0; i < 2; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		if (st < 0)
			return fail(CUDA_ERROR_NO_DEVICE, "simulated device at %s: the connection broke during registration", path);
		reg[n] = 0;
		return fail(CUDA_ERROR_INVALID_DEVICE, "simulated device at %s refused the context: %s", path, (char *)reg);
	}
	CUresult r = CUDA_SUCCESS;
	struct stat sd, sr;
	if (n != REG_SIZE || get32(reg) != REG_MAGIC || get32(reg + 4) != PROTOCOL_VERSION || fds[0] < 0 || fds[1] < 0 ||
	    fstat(fds[0], &sd) < 0 || fstat(fds[1], &sr) < 0) {
		r = fail(CUDA_ERROR_NO_DEVICE, "simulated device at %s: registration reply not understood (another gpufeed version?)", path);
		goto out;
	}
	c->devices = (int)get32(reg + 12);
	c->pid = (int)(int64_t)get64(reg + 16);
	c->clock_offset = (int64_t)get64(reg + 24);
	c->max_pending = get32(reg + 40);
	c->ring_cap = get32(reg + 44);
	c->bw[0] = getf64(reg + 48);
	c->bw[1] = getf64(reg + 56);
	c->bw[2] = getf64(reg + 64);
	c->pageable_factor = getf64(reg + 72);
	c->launch_cost_ns = get64(reg + 80);
	c->mem_total = get64(reg + 88);
	memcpy(c->name, reg + 96, 63);
	c->name[63] = 0;
	/* GPUFEED_SIMDEV_LAUNCH_US overrides the device's launch cost for the
	 * contexts this process makes from now on. */
	const char *e = getenv("GPUFEED_SIMDEV_LAUNCH_US");
	if (e && *e) {
		char *end;
		double us = strtod(e, &end);
		if (*end != 0 || !(us >= 0 && us <= 1000)) {
			r = fail(CUDA_ERROR_INVALID_VALUE, "GPUFEED_SIMDEV_LAUNCH_US=%s: want microseconds from 0 to 1000", e);
			goto out;
		}
		c->launch_cost_ns = (uint64_t)(us * 1000.0 + 0.5);
	}
	if (c->max_pending < 1 || c->max_pending > (1u << 16) || c->ring_cap < 64 || c->ring_cap > (1u << 24) ||
	    (size_t)sr.st_size < RING_REC_OFF + (size_t)c->ring_cap * REC_SIZE || sd.st_size < 4096 ||
	    !(c->bw[0] > 0) || !(c->bw[1] > 0) || !(c->bw[2] > 0) || !(c->pageable_factor > 0) || c->pageable_factor > 1) {
		r = fail(CUDA_ERROR_NO_DEVICE, "simulated device at %s: registration values out of range", path);
		goto out;
	}
	c->dev_len = (size_t)sd.st_size;
	c->ring_len = (size_t)sr.st_size;
	c->dev = mmap(NULL, c->dev_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	c->ring = mmap(NULL, c->ring_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[1], 0);
	if (c->dev == MAP_FAILED || c->ring == MAP_FAILED) {
		if (c->dev != MAP_FAILED)
			munmap(c->dev, c->dev_len);
		if (c->ring != MAP_FAILED)
			munmap(c->ring, c->ring_len);
		c->dev = c->ring = NULL;
		r = fail(CUDA_ERROR_OPERATING_SYSTEM, "simulated device at %s: mapping its shared memory: %s", path, strerror(errno));
		goto out;
	}
	if (get32(c->dev) != DEV_MAGIC || get32(c->ring) != RING_MAGIC || get32(c->ring + 8) != c->ring_cap ||
	    get32(c->ring + 12) != REC_SIZE) {
		munmap(c->dev, c->dev_len);
		munmap(c->ring, c->ring_len);
		c->dev = c->ring = NULL;
		r = fail(CUDA_ERROR_NO_DEVICE, "simulated device at %s: shared memory layout not understood", path);
		goto out;
	}
	c->sock = fd;
	fd = -1;
out:
	if (fd >= 0)
		close(fd);
	close(fds[0]);
	close(fds[1]);
	return r;
}

static CUresult ctx_new(int slot, int ord, unsigned int flags, int primary, struct CUctx_st **out)
{
	struct CUctx_st *c = calloc(1, sizeof *c);
	if (!c)
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	c->magic = CTX_MAGIC;
	c->server = slot;
	c->srv = g_servers[slot];
	c->ordinal = ord;
	c->flags = flags;
	c->primary = primary;
	c->refs = 1;
	c->sock = -1;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->sock_mu, NULL);
	CUresult r = ctx_register(c);
	if (r) {
		free(c);
		return r;
	}
	c->null_stream.magic = STREAM_MAGIC;
	c->null_stream.ctx = c;
	c->null_stream.id = 0;
	c->null_stream.ends = calloc(c->max_pending, sizeof(int64_t));
	if (!c->null_stream.ends) {
		close(c->sock);
		munmap(c->ring, c->ring_len);
		munmap(c->dev, c->dev_len);
		free(c);
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	}
	c->next_stream = 1;
	static uint64_t contexts_made;
	c->next_ptr = 0x100000000000ULL + ((contexts_made++ & 0xff) << 40); /* distinct ranges, never host-looking */
	c->next_ctx = g_ctxs;
	g_ctxs = c;
	atomic_fetch_add(&g_active_ctxs, 1);
	*out = c;
	return CUDA_SUCCESS;
}

static struct CUctx_st *current(void) { return tls_depth ? tls_ctx[tls_depth - 1] : NULL; }

static CUresult live_ctx(struct CUctx_st **out)
{
	struct CUctx_st *c = current();
	if (!c)
		return fail(CUDA_ERROR_INVALID_CONTEXT, "no current context on this thread (cuCtxSetCurrent)");
	if (c->magic != CTX_MAGIC)
		return fail(CUDA_ERROR_INVALID_CONTEXT, "the current context is not a context");
	if (c->dead)
		return fail(c->dead_why && strstr(c->dead_why, "fork") ? CUDA_ERROR_NOT_INITIALIZED : CUDA_ERROR_INVALID_CONTEXT,
			    "%s", c->dead_why ? c->dead_why : "the context was destroyed");
	*out = c;
	return CUDA_SUCCESS;
}

static inline int64_t ctx_now(const struct CUctx_st *c) { return mono_now() + c->clock_offset; }

/* ---- waiting for the device ---- */

static unsigned int resolved_sched(const struct CUctx_st *c)
{
	unsigned int s = c->flags & CU_CTX_SCHED_MASK;
	if (s == CU_CTX_SCHED_SPIN || s == CU_CTX_SCHED_YIELD || s == CU_CTX_SCHED_BLOCKING_SYNC)
		return s;
	/* CU_CTX_SCHED_AUTO: "If the number of active CUDA contexts in the
	 * process C is greater than the number of logical processors P, yield;
	 * otherwise spin" (cuCtxCreate, cudaSetDeviceFlags). */
	return atomic_load(&g_active_ctxs) > g_cpus ? CU_CTX_SCHED_YIELD : CU_CTX_SCHED_SPIN;
}

static struct waiter *waiter_for(struct CUctx_st *c)
{
	for (struct waiter *w = tls_waiters; w; w = w->next)
		if (w->server == c->server && w->fd >= 0)
			return w;
	int fd = dial(c->srv->path);
	if (fd < 0)
		return NULL;
	unsigned char b[FRAME], hdr[FRAME];
	frame(b, OP_HELLO, ROLE_WAITER, (uint32_t)c->ordinal, mono_now(), PROTOCOL_VERSION, 1);
	if (full_write(fd, b, FRAME) < 0 || read_reply(fd, hdr, NULL, 0, NULL, NULL, 0) != 0) {
		close(fd);
		return NULL;
	}
	struct waiter *w = calloc(1, sizeof *w);
	if (!w) {
		close(fd);
		return NULL;
	}
	w->server = c->server;
	w->fd = fd;
	w->seq = 1;
	w->next = tls_waiters;
	tls_waiters = w;
	pthread_setspecific(g_waiter_key, tls_waiters);
	return w;
}

/* block_until sleeps once, in the kernel, on the device's channel: the
 * server answers when the device time reaches t. */
static CUresult block_until(struct CUctx_st *c, int64_t t)
{
	struct waiter *w = waiter_for(c);
	if (w) {
		unsigned char b[FRAME], hdr[FRAME];
		frame(b, OP_WAIT, 0, 0, ctx_now(c), (uint64_t)t, ++w->seq);
		if (full_write(w->fd, b, FRAME) == 0 && read_reply(w->fd, hdr, NULL, 0, NULL, NULL, 0) == 0)
			return CUDA_SUCCESS;
		close(w->fd);
		w->fd = -1;
	}
	return fail(CUDA_ERROR_DEVICE_UNAVAILABLE, "simulated device at %s went away during a blocking wait", c->srv->path);
}

/* wait_until returns once the device time reaches t, waiting as sched says. */
static CUresult wait_until(struct CUctx_st *c, int64_t t, unsigned int sched)
{
	if (ctx_now(c) >= t)
		return CUDA_SUCCESS;
	switch (sched) {
	case CU_CTX_SCHED_BLOCKING_SYNC:
		return block_until(c, t);
	case CU_CTX_SCHED_YIELD:
		while (ctx_now(c) < t)
			sched_yield();
		return CUDA_SUCCESS;
	default:
		while (ctx_now(c) < t)
			cpu_relax();
		return CUDA_SUCCESS;
	}
}

/* ---- the ring the server reads ---- */

static void nudge(struct CUctx_st *c)
{
	unsigned char b[FRAME];
	frame(b, OP_NUDGE, 0, 0, ctx_now(c), 0, 0);
	pthread_mutex_lock(&c->sock_mu);
	if (c->sock >= 0)
		(void)send(c->sock, b, FRAME, MSG_NOSIGNAL | MSG_DONTWAIT);
	pthread_mutex_unlock(&c->sock_mu);
}

/* ring_put appends one record; c->mu held. A full ring (the server has not
 * read it for a long while) waits for room, telling the server every
 * millisecond. */
static CUresult ring_put(struct CUctx_st *c, int64_t start, int64_t end, uint64_t bytes, uint32_t stream, int kind, int pinned,
			 uint32_t count)
{
	_Atomic uint64_t *head = (_Atomic uint64_t *)(c->ring + RING_HEAD_OFF);
	_Atomic uint64_t *tail = (_Atomic uint64_t *)(c->ring + RING_TAIL_OFF);
	uint64_t h = atomic_load_explicit(head, memory_order_relaxed);
	for (;;) {
		uint64_t t = atomic_load_explicit(tail, memory_order_acquire);
		if (h - t < c->ring_cap)
			break;
		int64_t now = mono_now();
		if (now - c->nudged_at > 1000000) {
			c->nudged_at = now;
			nudge(c);
			/* a server that went away never reads again */
			unsigned char peek;
			pthread_mutex_lock(&c->sock_mu);
			ssize_t r = c->sock >= 0 ? recv(c->sock, &peek, 1, MSG_PEEK | MSG_DONTWAIT) : 0;
			pthread_mutex_unlock(&c->sock_mu);
			if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
				return fail(CUDA_ERROR_DEVICE_UNAVAILABLE, "simulated device at %s went away", c->srv->path);
		}
		struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
	}
	unsigned char *r = c->ring + RING_REC_OFF + (size_t)(h % c->ring_cap) * REC_SIZE;
	put64(r, (uint64_t)start);
	put64(r + 8, (uint64_t)end);
	put64(r + 16, bytes);
	put32(r + 24, stream);
	r[28] = (unsigned char)kind;
	r[29] = pinned ? REC_PINNED : 0;
	r[30] = (unsigned char)(count & 0xff);
	r[31] = (unsigned char)(count >> 8);
	atomic_store_explicit(head, h + 1, memory_order_release);
	uint64_t t = atomic_load_explicit(tail, memory_order_relaxed);
	if (h + 1 - t == c->ring_cap / 4)
		nudge(c);
	return CUDA_SUCCESS;
}

/* ---- streams ---- */

static void retire(struct CUstream_st *s, int64_t now)
{
	uint32_t cap = s->ctx->max_pending;
	while (s->count && s->ends[s->head] <= now) {
		s->head = (s->head + 1) % cap;
		s->count--;
	}
}

static CUresult resolve_stream(struct CUctx_st *c, CUstream h, struct CUstream_st **out)
{
	if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
		*out = &c->null_stream;
		return CUDA_SUCCESS;
	}
	struct CUstream_st *s = (struct CUstream_st *)h;
	if (s->magic != STREAM_MAGIC)
		return fail(CUDA_ERROR_INVALID_HANDLE, "not a stream");
	if (s->ctx != c)
		return fail(CUDA_ERROR_INVALID_HANDLE, "the stream belongs to another context");
	*out = s;
	return CUDA_SUCCESS;
}

static int64_t copy_duration(const struct CUctx_st *c, int kind, int pinned, uint64_t bytes)
{
	double bw = c->bw[kind - 1];
	if (!pinned && kind != KIND_D2D)
		bw *= c->pageable_factor;
	double ns = (double)bytes / bw * 1e9;
	if (ns > (double)MAX_OP_NS)
		ns = (double)MAX_OP_NS;
	return (int64_t)(ns + 0.999999);
}

/* place puts one operation on stream s: it starts when the stream is free
 * (and, for a host copy, when its direction's copy engine is), waits for
 * room when the stream is full, and records it for the server. c->mu held;
 * returns the end time in *endp. */
static CUresult place(struct CUctx_st *c, struct CUstream_st *s, int kind, int pinned, int64_t dur, uint64_t bytes,
		      uint32_t count, int64_t *endp)
{
	int64_t now;
	for (;;) {
		now = ctx_now(c);
		retire(s, now);
		if (s->count < c->max_pending)
			break;
		/* A full stream: the launch waits for the oldest operation, as
		 * the driver's does, the way the context waits for anything. */
		int64_t t = s->ends[s->head];
		pthread_mutex_unlock(&c->mu);
		CUresult r = wait_until(c, t, resolved_sched(c));
		pthread_mutex_lock(&c->mu);
		if (r)
			return r;
		if (c->dead)
			return fail(CUDA_ERROR_INVALID_CONTEXT, "the context was destroyed meanwhile");
	}
	int64_t start = now > s->last_end ? now : s->last_end;
	if (kind == KIND_H2D || kind == KIND_D2H) {
		/* One copy engine per direction, shared by every process. */
		_Atomic int64_t *eng = (_Atomic int64_t *)(c->dev + DEV_ENGINE_OFF + (kind - 1) * 64);
		int64_t e = atomic_load(eng), st, en;
		do {
			st = start > e ? start : e;
			en = st + dur;
		} while (!atomic_compare_exchange_weak(eng, &e, en));
		start = st;
	}
	int64_t end = start + dur;
	CUresult r = ring_put(c, start, end, bytes, s->id, kind, pinned, count);
	if (r)
		return r;
	s->ends[(s->head + s->count) % c->max_pending] = end;
	s->count++;
	s->last_end = end;
	if (endp)
		*endp = end;
	return CUDA_SUCCESS;
}

static CUresult capture_add(struct CUgraph_st *g, int kind, int pinned, int64_t dur, uint64_t bytes)
{
	if (g->n == g->cap) {
		size_t nc = g->cap ? g->cap * 2 : 16;
		struct node *nn = realloc(g->nodes, nc * sizeof *nn);
		if (!nn)
			return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		g->nodes = nn;
		g->cap = nc;
	}
	g->nodes[g->n++] = (struct node){.kind = (uint8_t)kind, .pinned = (uint8_t)pinned, .dur = dur, .bytes = bytes};
	return CUDA_SUCCESS;
}

/* enqueue is an asynchronous operation: its CPU cost, then its place on the
 * stream (or in the graph being captured). */
static CUresult enqueue(CUstream h, int kind, int pinned, int64_t dur, uint64_t bytes, int64_t *endp)
{
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(c, h, &s)))
		return r;
	spend_ns(c->launch_cost_ns);
	pthread_mutex_lock(&c->mu);
	if (c->dead)
		r = fail(CUDA_ERROR_INVALID_CONTEXT, "the context was destroyed");
	else if (s->capture)
		r = capture_add(s->capture, kind, pinned, dur, bytes);
	else
		r = place(c, s, kind, pinned, dur, bytes, 1, endp);
	pthread_mutex_unlock(&c->mu);
	return r;
}

/* ---- exported: initialisation ---- */

EXPORT CUresult cuInit(unsigned int Flags)
{
	if (Flags != 0)
		return fail(CUDA_ERROR_INVALID_VALUE, "cuInit: flags must be 0");
	ensure_lib();
	pthread_mutex_lock(&g_mu);
	CUresult r = CUDA_SUCCESS;
	if (g_default < 0) { /* initialised once, as CUDA is */
		const char *path = getenv("GPUFEED_SIMDEV");
		if (!path || !*path)
			r = fail(CUDA_ERROR_NO_DEVICE, "GPUFEED_SIMDEV is not set: start a simulated device with `gpufeed simdev --socket PATH` and export GPUFEED_SIMDEV=PATH");
		else
			r = server_slot(path, &g_default);
		if (r)
			g_default = -1;
	}
	pthread_mutex_unlock(&g_mu);
	return r;
}

EXPORT CUresult gpufeedSimDeviceGet(CUdevice *device, const char *socketPath, int ordinal)
{
	if (!device || !socketPath || !*socketPath)
		return fail(CUDA_ERROR_INVALID_VALUE, "gpufeedSimDeviceGet: a device pointer and a socket path are needed");
	ensure_lib();
	pthread_mutex_lock(&g_mu);
	int slot;
	CUresult r = server_slot(socketPath, &slot);
	if (!r && (ordinal < 0 || ordinal >= g_servers[slot]->devices))
		r = fail(CUDA_ERROR_INVALID_DEVICE, "no simulated device %d at %s (it has %d)", ordinal, socketPath, g_servers[slot]->devices);
	if (!r)
		*device = (CUdevice)((slot << 16) | ordinal);
	pthread_mutex_unlock(&g_mu);
	return r;
}

EXPORT const char *gpufeedSimLastError(void) { return tls_err; }

EXPORT CUresult cuDriverGetVersion(int *v)
{
	if (!v)
		return CUDA_ERROR_INVALID_VALUE;
	*v = 12000;
	return CUDA_SUCCESS;
}

static const struct {
	CUresult r;
	const char *name, *text;
} g_errors[] = {
	{CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
	{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
	{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
	{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
	{CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
	{CUDA_ERROR_DEVICE_UNAVAILABLE, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable"},
	{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
	{CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
	{CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
	{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
	{CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
	{CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
	{CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
	{CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
	{CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
	{CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
	{CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
	{CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
	{CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing"},
	{CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture"},
	{CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

EXPORT CUresult cuGetErrorName(CUresult e, const char **p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
		if (g_errors[i].r == e) {
			*p = g_errors[i].name;
			return CUDA_SUCCESS;
		}
	*p = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult e, const char **p)
{
	if (!p)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof g_errors / sizeof g_errors[0]; i++)
		if (g_errors[i].r == e) {
			*p = g_errors[i].text;
			return CUDA_SUCCESS;
		}
	*p = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* ---- exported: devices ---- */

EXPORT CUresult cuDeviceGetCount(int *count)
{
	if (!count)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	CUresult r = g_default >= 0 ? CUDA_SUCCESS : fail(CUDA_ERROR_NOT_INITIALIZED, "cuInit has not succeeded");
	if (!r)
		*count = g_servers[g_default]->devices;
	pthread_mutex_unlock(&g_mu);
	return r;
}

EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	CUresult r = g_default >= 0 ? CUDA_SUCCESS : fail(CUDA_ERROR_NOT_INITIALIZED, "cuInit has not succeeded");
	if (!r && (ordinal < 0 || ordinal >= g_servers[g_default]->devices))
		r = fail(CUDA_ERROR_INVALID_DEVICE, "no simulated device %d (there are %d)", ordinal, g_servers[g_default]->devices);
	if (!r)
		*device = (CUdevice)((g_default << 16) | ordinal);
	pthread_mutex_unlock(&g_mu);
	return r;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
	if (!name || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	int s, o;
	CUresult r = decode_device(dev, &s, &o);
	pthread_mutex_unlock(&g_mu);
	if (!r)
		snprintf(name, (size_t)len, "gpufeed simulated GPU %d", o);
	return r;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *busid, int len, CUdevice dev)
{
	if (!busid || len <= 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	int s, o;
	CUresult r = decode_device(dev, &s, &o);
	pthread_mutex_unlock(&g_mu);
	if (r)
		return r;
	busid[0] = 0;
	return fail(CUDA_ERROR_NOT_SUPPORTED, "simulated device %d sits on no PCI bus: its PCIe link is the simulated device's, in the observer's samples", o);
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	if (!bytes)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	int s, o;
	CUresult r = decode_device(dev, &s, &o);
	pthread_mutex_unlock(&g_mu);
	if (!r)
		*bytes = (size_t)80 << 30;
	return r;
}

EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice dev)
{
	if (!pi)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	int s, o;
	CUresult r = decode_device(dev, &s, &o);
	pthread_mutex_unlock(&g_mu);
	if (r)
		return r;
	switch (a) {
	case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
	case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
	case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 132; break;
	case CU_DEVICE_ATTRIBUTE_INTEGRATED: *pi = 0; break;
	case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: *pi = 1; break;
	case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = 2; break; /* one copy engine per direction */
	case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
	case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
	default: return fail(CUDA_ERROR_INVALID_VALUE, "device attribute %d is not simulated", (int)a);
	}
	return CUDA_SUCCESS;
}

/* ---- exported: contexts ---- */

static CUresult check_flags(unsigned int flags)
{
	unsigned int s = flags & CU_CTX_SCHED_MASK;
	if (s != CU_CTX_SCHED_AUTO && s != CU_CTX_SCHED_SPIN && s != CU_CTX_SCHED_YIELD && s != CU_CTX_SCHED_BLOCKING_SYNC)
		return fail(CUDA_ERROR_INVALID_VALUE, "context flags 0x%x: only one of the scheduling flags may be set", flags);
	if (flags & ~(unsigned)(CU_CTX_SCHED_MASK | CU_CTX_MAP_HOST | CU_CTX_LMEM_RESIZE_TO_MAX))
		return fail(CUDA_ERROR_INVALID_VALUE, "context flags 0x%x: unknown flags", flags);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
	CUresult r = check_flags(flags);
	if (r)
		return r;
	pthread_mutex_lock(&g_mu);
	int s, o;
	if (!(r = decode_device(dev, &s, &o))) {
		g_servers[s]->primary_flags[o] = flags;
		/* _v2: the flags of an active primary context change too. */
		if (g_servers[s]->primary[o])
			g_servers[s]->primary[o]->flags = flags;
	}
	pthread_mutex_unlock(&g_mu);
	return r;
}

EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
	if (!flags || !active)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	int s, o;
	CUresult r = decode_device(dev, &s, &o);
	if (!r) {
		*flags = g_servers[s]->primary_flags[o];
		*active = g_servers[s]->primary[o] != NULL;
	}
	pthread_mutex_unlock(&g_mu);
	return r;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&g_mu);
	int s, o;
	CUresult r = decode_device(dev, &s, &o);
	if (!r) {
		struct CUctx_st *c = g_servers[s]->primary[o];
		if (c) {
			c->refs++;
		} else if (!(r = ctx_new(s, o, g_servers[s]->primary_flags[o], 1, &c))) {
			g_servers[s]->primary[o] = c;
		}
		if (!r)
			*pctx = c;
	}
	pthread_mutex_unlock(&g_mu);
	return r;
}

static void ctx_free_streams(struct CUctx_st *c)
{
	for (struct CUstream_st *s = c->streams, *n; s; s = n) {
		n = s->next;
		s->magic = 0;
		free(s->ends);
		free(s);
	}
	c->streams = NULL;
}

static void ctx_destroy(struct CUctx_st *c)
{
	pthread_mutex_lock(&c->mu);
	kill_ctx(c, "the context was destroyed");
	ctx_free_streams(c);
	free(c->staging);
	c->staging = NULL;
	free(c->allocs);
	c->allocs = NULL;
	c->nallocs = c->cap_allocs = 0;
	pthread_mutex_unlock(&c->mu);
	/* The object itself stays (dead): a stale handle must be refused, not
	 * read after free. */
	for (int i = 0; i < tls_depth; i++)
		if (tls_ctx[i] == c) {
			for (int j = i; j + 1 < tls_depth; j++)
				tls_ctx[j] = tls_ctx[j + 1];
			tls_depth--;
			i--;
		}
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	pthread_mutex_lock(&g_mu);
	int s, o;
	CUresult r = decode_device(dev, &s, &o);
	if (!r) {
		struct CUctx_st *c = g_servers[s]->primary[o];
		if (!c) {
			r = fail(CUDA_ERROR_INVALID_CONTEXT, "the primary context of device %d is not active", dev);
		} else if (--c->refs == 0) {
			g_servers[s]->primary[o] = NULL;
			ctx_destroy(c);
		}
	}
	pthread_mutex_unlock(&g_mu);
	return r;
}

EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult r = check_flags(flags);
	if (r)
		return r;
	pthread_mutex_lock(&g_mu);
	int s, o;
	struct CUctx_st *c = NULL;
	if (!(r = decode_device(dev, &s, &o)))
		r = ctx_new(s, o, flags, 0, &c);
	pthread_mutex_unlock(&g_mu);
	if (r)
		return r;
	if (tls_depth == CTX_STACK)
		return fail(CUDA_ERROR_INVALID_VALUE, "context stack full");
	tls_ctx[tls_depth++] = c;
	*pctx = c;
	return CUDA_SUCCESS;
}

static CUresult check_ctx(struct CUctx_st *c)
{
	if (!c || c->magic != CTX_MAGIC)
		return fail(CUDA_ERROR_INVALID_CONTEXT, "not a context");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	CUresult r = check_ctx(ctx);
	if (r)
		return r;
	if (ctx->primary)
		return fail(CUDA_ERROR_INVALID_CONTEXT, "a primary context is released with cuDevicePrimaryCtxRelease, not destroyed");
	pthread_mutex_lock(&g_mu);
	ctx_destroy(ctx);
	pthread_mutex_unlock(&g_mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
	if (ctx == NULL) {
		if (tls_depth)
			tls_depth--;
		return CUDA_SUCCESS;
	}
	CUresult r = check_ctx(ctx);
	if (r)
		return r;
	if (tls_depth == 0)
		tls_depth = 1;
	tls_ctx[tls_depth - 1] = ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	*pctx = current();
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
	CUresult r = check_ctx(ctx);
	if (r)
		return r;
	if (tls_depth == CTX_STACK)
		return fail(CUDA_ERROR_INVALID_VALUE, "context stack full");
	tls_ctx[tls_depth++] = ctx;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
	if (!tls_depth)
		return fail(CUDA_ERROR_INVALID_CONTEXT, "no current context to pop");
	struct CUctx_st *c = tls_ctx[--tls_depth];
	if (pctx)
		*pctx = c;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	*device = (CUdevice)((c->server << 16) | c->ordinal);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuCtxGetFlags(unsigned int *flags)
{
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	if (!flags)
		return CUDA_ERROR_INVALID_VALUE;
	*flags = c->flags;
	return CUDA_SUCCESS;
}

EXPORT CUresult gpufeedSimCtxGetInfo(CUcontext ctx, gpufeedSimInfo *info)
{
	if (!info || info->size < sizeof(gpufeedSimInfo))
		return fail(CUDA_ERROR_INVALID_VALUE, "gpufeedSimCtxGetInfo: info.size must be sizeof(gpufeedSimInfo)");
	struct CUctx_st *c = ctx;
	CUresult r;
	if (!c && (r = live_ctx(&c)))
		return r;
	if ((r = check_ctx(c)))
		return r;
	if (c->dead)
		return fail(CUDA_ERROR_INVALID_CONTEXT, "%s", c->dead_why);
	info->pid = c->pid;
	info->ordinal = c->ordinal;
	info->devices = c->devices;
	info->schedFlags = c->flags & CU_CTX_SCHED_MASK;
	info->schedResolved = resolved_sched(c);
	info->maxPending = c->max_pending;
	info->reserved = 0;
	info->launchCostNs = c->launch_cost_ns;
	for (int i = 0; i < 3; i++)
		info->bandwidth[i] = c->bw[i];
	info->pageableFactor = c->pageable_factor;
	return CUDA_SUCCESS;
}

/* ---- exported: synchronisation ---- */

EXPORT CUresult cuCtxSynchronize(void)
{
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	pthread_mutex_lock(&c->mu);
	int64_t t = c->null_stream.last_end;
	for (struct CUstream_st *s = c->streams; s; s = s->next) {
		if (s->capture) {
			pthread_mutex_unlock(&c->mu);
			return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "a stream of this context is capturing");
		}
		if (s->last_end > t)
			t = s->last_end;
	}
	pthread_mutex_unlock(&c->mu);
	return wait_until(c, t, resolved_sched(c));
}

EXPORT CUresult cuStreamCreate(CUstream *ph, unsigned int flags)
{
	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)
		return fail(CUDA_ERROR_INVALID_VALUE, "stream flags 0x%x", flags);
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	pthread_mutex_lock(&c->mu);
	if (c->nstreams >= MAX_STREAMS - 1) {
		pthread_mutex_unlock(&c->mu);
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "a simulated context holds at most %d streams", MAX_STREAMS);
	}
	struct CUstream_st *s = calloc(1, sizeof *s);
	int64_t *ends = calloc(c->max_pending, sizeof *ends);
	if (!s || !ends) {
		free(s);
		free(ends);
		pthread_mutex_unlock(&c->mu);
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	}
	s->magic = STREAM_MAGIC;
	s->ctx = c;
	s->id = c->next_stream++;
	s->flags = flags;
	s->ends = ends;
	s->next = c->streams;
	c->streams = s;
	c->nstreams++;
	pthread_mutex_unlock(&c->mu);
	*ph = s;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamDestroy_v2(CUstream h)
{
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(c, h, &s)))
		return r;
	if (s == &c->null_stream)
		return fail(CUDA_ERROR_INVALID_HANDLE, "the default stream cannot be destroyed");
	/* Work already queued still runs: the server has its records. */
	pthread_mutex_lock(&c->mu);
	for (struct CUstream_st **p = &c->streams; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			break;
		}
	c->nstreams--;
	s->magic = 0;
	pthread_mutex_unlock(&c->mu);
	free(s->ends);
	free(s);
	return CUDA_SUCCESS;
}

static CUresult stream_target(CUstream h, struct CUctx_st **cp, int64_t *t)
{
	CUresult r = live_ctx(cp);
	if (r)
		return r;
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(*cp, h, &s)))
		return r;
	pthread_mutex_lock(&(*cp)->mu);
	if (s->capture)
		r = fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the stream is capturing");
	*t = s->last_end;
	pthread_mutex_unlock(&(*cp)->mu);
	return r;
}

EXPORT CUresult cuStreamSynchronize(CUstream h)
{
	struct CUctx_st *c;
	int64_t t;
	CUresult r = stream_target(h, &c, &t);
	if (r)
		return r;
	return wait_until(c, t, resolved_sched(c));
}

EXPORT CUresult cuStreamQuery(CUstream h)
{
	struct CUctx_st *c;
	int64_t t;
	CUresult r = stream_target(h, &c, &t);
	if (r)
		return r;
	return ctx_now(c) >= t ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

static CUresult check_event(CUevent e)
{
	if (!e || e->magic != EVENT_MAGIC)
		return fail(CUDA_ERROR_INVALID_HANDLE, "not an event");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags)
{
	(void)flags;
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r || (r = check_event(e)))
		return r;
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(c, h, &s)))
		return r;
	pthread_mutex_lock(&c->mu);
	if (s->capture)
		r = fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "events are not captured by the simulator");
	else if (e->recorded && e->time > s->last_end)
		s->last_end = e->time; /* the stream's next work starts after the event */
	pthread_mutex_unlock(&c->mu);
	return r;
}

EXPORT CUresult cuEventCreate(CUevent *ph, unsigned int flags)
{
	if (!ph)
		return CUDA_ERROR_INVALID_VALUE;
	if (flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS))
		return fail(CUDA_ERROR_INVALID_VALUE, "event flags 0x%x", flags);
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	struct CUevent_st *e = calloc(1, sizeof *e);
	if (!e)
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	e->magic = EVENT_MAGIC;
	e->flags = flags;
	e->ctx = c;
	*ph = e;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventRecord(CUevent e, CUstream h)
{
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r || (r = check_event(e)))
		return r;
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(c, h, &s)))
		return r;
	spend_ns(c->launch_cost_ns); /* an event record is an enqueued command too */
	pthread_mutex_lock(&c->mu);
	if (s->capture) {
		r = fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "events are not captured by the simulator");
	} else {
		int64_t now = ctx_now(c);
		e->time = now > s->last_end ? now : s->last_end;
		e->recorded = 1;
	}
	pthread_mutex_unlock(&c->mu);
	return r;
}

EXPORT CUresult cuEventSynchronize(CUevent e)
{
	CUresult r = check_event(e);
	if (r)
		return r;
	struct CUctx_st *c = e->ctx;
	if (c->dead)
		return fail(CUDA_ERROR_INVALID_CONTEXT, "%s", c->dead_why);
	if (!e->recorded)
		return CUDA_SUCCESS;
	/* An event made with CU_EVENT_BLOCKING_SYNC blocks whatever the context says. */
	return wait_until(c, e->time, (e->flags & CU_EVENT_BLOCKING_SYNC) ? CU_CTX_SCHED_BLOCKING_SYNC : resolved_sched(c));
}

EXPORT CUresult cuEventQuery(CUevent e)
{
	CUresult r = check_event(e);
	if (r)
		return r;
	if (!e->recorded)
		return CUDA_SUCCESS;
	return ctx_now(e->ctx) >= e->time ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EXPORT CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b)
{
	CUresult r;
	if (!ms)
		return CUDA_ERROR_INVALID_VALUE;
	if ((r = check_event(a)) || (r = check_event(b)))
		return r;
	if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
		return fail(CUDA_ERROR_INVALID_HANDLE, "an event made with CU_EVENT_DISABLE_TIMING has no time");
	if (!a->recorded || !b->recorded)
		return fail(CUDA_ERROR_INVALID_HANDLE, "an event was never recorded");
	int64_t now = ctx_now(a->ctx);
	if (now < a->time || now < b->time)
		return CUDA_ERROR_NOT_READY;
	*ms = (float)((double)(b->time - a->time) / 1e6);
	return CUDA_SUCCESS;
}

EXPORT CUresult gpufeedSimEventTime(CUevent e, unsigned long long *ns)
{
	CUresult r = check_event(e);
	if (r)
		return r;
	if (!ns)
		return CUDA_ERROR_INVALID_VALUE;
	if (!e->recorded)
		return fail(CUDA_ERROR_INVALID_HANDLE, "the event was never recorded");
	*ns = (unsigned long long)e->time;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuEventDestroy_v2(CUevent e)
{
	CUresult r = check_event(e);
	if (r)
		return r;
	e->magic = 0;
	free(e);
	return CUDA_SUCCESS;
}

/* ---- exported: modules ---- */

static int ident_char(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '$' || ch == '.';
}

static const char *skip_space(const char *p)
{
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (p[0] == '/' && p[1] == '/') {
			while (*p && *p != '\n')
				p++;
		} else if (p[0] == '/' && p[1] == '*') {
			const char *e = strstr(p + 2, "*/");
			p = e ? e + 2 : p + strlen(p);
		} else {
			return p;
		}
	}
}

/* parse_ptx finds the .entry functions of PTX text and whether each takes a
 * 64-bit first parameter (the simulated duration). */
static CUresult parse_ptx(const char *text, struct CUmod_st *m)
{
	size_t cap = 0;
	for (const char *p = text; (p = strstr(p, ".entry")) != NULL;) {
		if (p > text && ident_char(p[-1])) {
			p += 6;
			continue;
		}
		p += 6;
		if (ident_char(*p))
			continue;
		p = skip_space(p);
		char name[128];
		size_t n = 0;
		while (ident_char(*p) && n < sizeof name - 1)
			name[n++] = *p++;
		name[n] = 0;
		if (!n)
			continue;
		int dur = 0;
		p = skip_space(p);
		if (*p == '(') {
			p = skip_space(p + 1);
			if (strncmp(p, ".param", 6) == 0) {
				p = skip_space(p + 6);
				while (strncmp(p, ".align", 6) == 0) { /* .param .align N .b8 ... */
					p = skip_space(p + 6);
					while (ident_char(*p))
						p++;
					p = skip_space(p);
				}
				dur = strncmp(p, ".u64", 4) == 0 || strncmp(p, ".s64", 4) == 0 || strncmp(p, ".b64", 4) == 0;
				if (dur && ident_char(p[4]))
					dur = 0;
			}
		}
		if (m->n == cap) {
			cap = cap ? cap * 2 : 4;
			struct CUfunc_st *nf = realloc(m->funcs, cap * sizeof *nf);
			if (!nf)
				return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
			m->funcs = nf;
		}
		struct CUfunc_st *f = &m->funcs[m->n++];
		memset(f, 0, sizeof *f);
		f->magic = FUNC_MAGIC;
		f->mod = m;
		strcpy(f->name, name);
		f->has_duration = dur;
	}
	if (!m->n)
		return fail(CUDA_ERROR_INVALID_IMAGE, "the module has no .entry function: the simulator reads PTX text");
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	if (!module || !image)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	const unsigned char *b = image;
	if ((b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F') || get32(b) == 0xba55ed50u || get32(b) == 0x466243b1u)
		return fail(CUDA_ERROR_INVALID_IMAGE, "a cubin or fatbin: the simulator reads PTX text only");
	struct CUmod_st *m = calloc(1, sizeof *m);
	if (!m)
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	m->magic = MOD_MAGIC;
	if ((r = parse_ptx(image, m))) {
		free(m->funcs);
		free(m);
		return r;
	}
	*module = m;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions, int *options, void **optionValues)
{
	(void)numOptions;
	(void)options;
	(void)optionValues; /* JIT options: nothing to compile */
	return cuModuleLoadData(module, image);
}

EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule m, const char *name)
{
	if (!hfunc || !name)
		return CUDA_ERROR_INVALID_VALUE;
	if (!m || m->magic != MOD_MAGIC)
		return fail(CUDA_ERROR_INVALID_HANDLE, "not a module");
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->funcs[i].name, name) == 0) {
			*hfunc = &m->funcs[i];
			return CUDA_SUCCESS;
		}
	return fail(CUDA_ERROR_NOT_FOUND, "no kernel %s in the module", name);
}

EXPORT CUresult cuModuleUnload(CUmodule m)
{
	if (!m || m->magic != MOD_MAGIC)
		return fail(CUDA_ERROR_INVALID_HANDLE, "not a module");
	m->magic = 0;
	for (size_t i = 0; i < m->n; i++)
		m->funcs[i].magic = 0;
	free(m->funcs);
	free(m);
	return CUDA_SUCCESS;
}

/* ---- exported: launches ---- */

static CUresult kernel_duration(CUfunction f, void **params, void **extra, int64_t *dur)
{
	if (!f || f->magic != FUNC_MAGIC)
		return fail(CUDA_ERROR_INVALID_HANDLE, "not a kernel");
	uint64_t ns = 0;
	if (f->has_duration) {
		if (params && params[0]) {
			memcpy(&ns, params[0], 8);
		} else if (extra) {
			void *buf = NULL;
			size_t size = 0;
			for (int i = 0; i < 64 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
				if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
					buf = extra[i + 1];
				else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1])
					memcpy(&size, extra[i + 1], sizeof size);
				else
					return fail(CUDA_ERROR_INVALID_VALUE, "unknown entry in the launch's extra");
			}
			if (!buf || size < 8)
				return fail(CUDA_ERROR_INVALID_VALUE, "%s takes its duration as its first parameter: none was given", f->name);
			memcpy(&ns, buf, 8);
		} else {
			return fail(CUDA_ERROR_INVALID_VALUE, "%s takes its duration as its first parameter: none was given", f->name);
		}
	}
	if (ns > (uint64_t)MAX_OP_NS)
		return fail(CUDA_ERROR_INVALID_VALUE, "a kernel of %llu ns: the simulator runs kernels of at most an hour", (unsigned long long)ns);
	*dur = (int64_t)ns;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by,
			       unsigned int bz, unsigned int shmem, CUstream h, void **params, void **extra)
{
	(void)shmem;
	if (!gx || !gy || !gz || !bx || !by || !bz)
		return fail(CUDA_ERROR_INVALID_VALUE, "a grid or block dimension is 0");
	int64_t dur = 0;
	CUresult r = kernel_duration(f, params, extra, &dur);
	if (r)
		return r;
	return enqueue(h, KIND_KERNEL, 0, dur, 0, NULL);
}

EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra)
{
	if (!cfg)
		return CUDA_ERROR_INVALID_VALUE;
	return cuLaunchKernel(f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ,
			      cfg->sharedMemBytes, cfg->hStream, params, extra);
}

/* ---- exported: memory ---- */

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n)
{
	if (!dptr || n == 0)
		return fail(CUDA_ERROR_INVALID_VALUE, "cuMemAlloc: a pointer and a non-zero size are needed");
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	pthread_mutex_lock(&c->mu);
	if (n > c->mem_total - c->mem_used) {
		pthread_mutex_unlock(&c->mu);
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of simulated device memory (%llu of %llu bytes in use)",
			    (unsigned long long)c->mem_used, (unsigned long long)c->mem_total);
	}
	if (c->nallocs == c->cap_allocs) {
		size_t nc = c->cap_allocs ? c->cap_allocs * 2 : 64;
		struct alloc *na = realloc(c->allocs, nc * sizeof *na);
		if (!na) {
			pthread_mutex_unlock(&c->mu);
			return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		}
		c->allocs = na;
		c->cap_allocs = nc;
	}
	CUdeviceptr p = c->next_ptr;
	c->next_ptr += ((CUdeviceptr)n + 511) & ~(CUdeviceptr)511; /* cudaMalloc aligns to 256 bytes at least */
	c->allocs[c->nallocs++] = (struct alloc){p, n};
	c->mem_used += n;
	pthread_mutex_unlock(&c->mu);
	*dptr = p;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p)
{
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	if (p == 0)
		return CUDA_SUCCESS;
	pthread_mutex_lock(&c->mu);
	r = fail(CUDA_ERROR_INVALID_VALUE, "cuMemFree: 0x%llx was not allocated by this context", p);
	for (size_t i = 0; i < c->nallocs; i++)
		if (c->allocs[i].ptr == p) {
			c->mem_used -= c->allocs[i].size;
			c->allocs[i] = c->allocs[--c->nallocs];
			r = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&c->mu);
	return r;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *freeb, size_t *total)
{
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	if (!freeb || !total)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&c->mu);
	*total = c->mem_total;
	*freeb = c->mem_total - c->mem_used;
	pthread_mutex_unlock(&c->mu);
	return CUDA_SUCCESS;
}

static CUresult pin_add(void *p, size_t n, int alloc)
{
	uintptr_t a = (uintptr_t)p;
	pthread_mutex_lock(&g_pin_mu);
	for (size_t i = 0; i < g_npins; i++)
		if (a < g_pins[i].p + g_pins[i].n && g_pins[i].p < a + n) {
			pthread_mutex_unlock(&g_pin_mu);
			return fail(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "the range overlaps page-locked memory already registered");
		}
	if (g_npins == g_cap_pins) {
		size_t nc = g_cap_pins ? g_cap_pins * 2 : 16;
		struct pinned *np = realloc(g_pins, nc * sizeof *np);
		if (!np) {
			pthread_mutex_unlock(&g_pin_mu);
			return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		}
		g_pins = np;
		g_cap_pins = nc;
	}
	g_pins[g_npins++] = (struct pinned){a, n, alloc};
	pthread_mutex_unlock(&g_pin_mu);
	return CUDA_SUCCESS;
}

/* pin_remove drops the range starting at p; *n and *alloc say what it was. */
static int pin_remove(void *p, size_t *n, int *alloc)
{
	int found = 0;
	pthread_mutex_lock(&g_pin_mu);
	for (size_t i = 0; i < g_npins; i++)
		if (g_pins[i].p == (uintptr_t)p) {
			*n = g_pins[i].n;
			*alloc = g_pins[i].alloc;
			g_pins[i] = g_pins[--g_npins];
			found = 1;
			break;
		}
	pthread_mutex_unlock(&g_pin_mu);
	return found;
}

static int is_pinned(const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p;
	int yes = 0;
	pthread_mutex_lock(&g_pin_mu);
	for (size_t i = 0; i < g_npins; i++)
		if (a >= g_pins[i].p && a + n <= g_pins[i].p + g_pins[i].n) {
			yes = 1;
			break;
		}
	pthread_mutex_unlock(&g_pin_mu);
	return yes;
}

EXPORT CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags)
{
	if (!pp || n == 0)
		return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc: a pointer and a non-zero size are needed");
	if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
		return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostAlloc flags 0x%x", flags);
	ensure_lib();
	/* Page-locked memory is resident: populated at allocation. */
	void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED)
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "cuMemHostAlloc of %zu bytes: %s", n, strerror(errno));
	CUresult r = pin_add(p, n, 1);
	if (r) {
		munmap(p, n);
		return r;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t n) { return cuMemHostAlloc(pp, n, 0); }

EXPORT CUresult cuMemFreeHost(void *p)
{
	size_t n;
	int alloc;
	if (!p || !pin_remove(p, &n, &alloc) || !alloc) {
		if (p && !alloc)
			pin_add(p, n, 0); /* registered, not allocated: put it back */
		return fail(CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost: not memory from cuMemHostAlloc");
	}
	munmap(p, n);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags)
{
	if (!p || n == 0)
		return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostRegister: a pointer and a non-zero size are needed");
	if (flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY))
		return fail(CUDA_ERROR_INVALID_VALUE, "cuMemHostRegister flags 0x%x", flags);
	ensure_lib();
	return pin_add(p, n, 0);
}

EXPORT CUresult cuMemHostUnregister(void *p)
{
	size_t n;
	int alloc = 0;
	if (!p || !pin_remove(p, &n, &alloc))
		return fail(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "cuMemHostUnregister: the pointer was not registered");
	if (alloc) {
		pin_add(p, n, 1);
		return fail(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "cuMemHostUnregister: memory from cuMemHostAlloc is freed with cuMemFreeHost");
	}
	return CUDA_SUCCESS;
}

#define STAGING (256u << 10)

/* stage does the host side of a pageable copy: the bytes go through a bounce
 * buffer (real memcpy work), until all are staged or the copy's end, when
 * the transfer is over and the driver's staging is too. */
static void stage(struct CUctx_st *c, int kind, void *host, size_t n, int64_t end)
{
	if (!c->staging && !(c->staging = malloc(STAGING)))
		return;
	unsigned char *h = host;
	for (size_t off = 0; off < n && ctx_now(c) < end; off += STAGING) {
		size_t k = n - off < STAGING ? n - off : STAGING;
		if (kind == KIND_H2D)
			memcpy(c->staging, h + off, k);
		else
			memcpy(h + off, c->staging, k);
	}
}

/* copy is every cuMemcpy*: async says the caller asked for an asynchronous
 * copy. What blocks follows CUDA's documented API synchronisation behaviour:
 * a host copy from or to pageable memory stages through a bounce buffer and
 * returns when done; a synchronous copy from or to page-locked memory
 * returns when done; an asynchronous one from page-locked memory, and every
 * device-to-device copy, returns at once. */
static CUresult copy(int kind, void *host, size_t n, CUstream h, int async)
{
	if (n > MAX_COPY_BYTES)
		return fail(CUDA_ERROR_INVALID_VALUE, "a copy of %zu bytes: the simulator copies at most 1 TiB at once", n);
	if (kind != KIND_D2D && n && !host)
		return fail(CUDA_ERROR_INVALID_VALUE, "a host copy needs a host pointer");
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(c, h, &s)))
		return r;
	int pinned = kind == KIND_D2D || is_pinned(host, n);
	int64_t dur = copy_duration(c, kind, pinned, n);
	int blocks = kind != KIND_D2D && (!pinned || !async);
	spend_ns(c->launch_cost_ns);
	int64_t end = 0;
	pthread_mutex_lock(&c->mu);
	if (c->dead) {
		pthread_mutex_unlock(&c->mu);
		return fail(CUDA_ERROR_INVALID_CONTEXT, "the context was destroyed");
	}
	if (s->capture) {
		r = blocks ? fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "a copy that blocks cannot be captured") : capture_add(s->capture, kind, pinned, dur, n);
		pthread_mutex_unlock(&c->mu);
		return r;
	}
	r = place(c, s, kind, pinned, dur, n, 1, &end);
	pthread_mutex_unlock(&c->mu);
	if (r || !blocks)
		return r;
	if (!pinned)
		stage(c, kind, host, n, end);
	return wait_until(c, end, resolved_sched(c));
}

EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *src, size_t n)
{
	(void)d;
	return copy(KIND_H2D, (void *)src, n, NULL, 0);
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr s, size_t n)
{
	(void)s;
	return copy(KIND_D2H, dst, n, NULL, 0);
}

EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n)
{
	(void)d;
	(void)s;
	return copy(KIND_D2D, NULL, n, NULL, 0);
}

EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *src, size_t n, CUstream h)
{
	(void)d;
	return copy(KIND_H2D, (void *)src, n, h, 1);
}

EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr s, size_t n, CUstream h)
{
	(void)s;
	return copy(KIND_D2H, dst, n, h, 1);
}

EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
	(void)d;
	(void)s;
	return copy(KIND_D2D, NULL, n, h, 1);
}

/* ---- exported: stream capture and graphs ---- */

EXPORT CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode)
{
	if (mode > CU_STREAM_CAPTURE_MODE_RELAXED)
		return fail(CUDA_ERROR_INVALID_VALUE, "capture mode %d", (int)mode);
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(c, h, &s)))
		return r;
	if (s == &c->null_stream)
		return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "the legacy default stream cannot be captured");
	struct CUgraph_st *g = calloc(1, sizeof *g);
	if (!g)
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	g->magic = GRAPH_MAGIC;
	pthread_mutex_lock(&c->mu);
	if (s->capture) {
		pthread_mutex_unlock(&c->mu);
		free(g);
		return fail(CUDA_ERROR_ILLEGAL_STATE, "the stream is already capturing");
	}
	s->capture = g;
	pthread_mutex_unlock(&c->mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamEndCapture(CUstream h, CUgraph *pg)
{
	if (!pg)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(c, h, &s)))
		return r;
	pthread_mutex_lock(&c->mu);
	struct CUgraph_st *g = s->capture;
	s->capture = NULL;
	pthread_mutex_unlock(&c->mu);
	if (!g)
		return fail(CUDA_ERROR_ILLEGAL_STATE, "the stream is not capturing");
	*pg = g;
	return CUDA_SUCCESS;
}

EXPORT CUresult cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st)
{
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(c, h, &s)))
		return r;
	pthread_mutex_lock(&c->mu);
	*st = s->capture ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	pthread_mutex_unlock(&c->mu);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g, unsigned long long flags)
{
	(void)flags;
	if (!pe)
		return CUDA_ERROR_INVALID_VALUE;
	if (!g || g->magic != GRAPH_MAGIC)
		return fail(CUDA_ERROR_INVALID_HANDLE, "not a graph");
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	struct CUgraphExec_st *e = calloc(1, sizeof *e);
	if (!e || (g->n && !(e->nodes = malloc(g->n * sizeof *e->nodes)))) {
		free(e);
		return fail(CUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	}
	e->magic = GEXEC_MAGIC;
	e->ctx = c;
	if (g->n)
		memcpy(e->nodes, g->nodes, g->n * sizeof *e->nodes);
	e->n = g->n;
	*pe = e;
	return CUDA_SUCCESS;
}

/* cuGraphLaunch queues the whole graph with one launch's CPU cost: its
 * kernels run back to back (one record for each run of kernels), its copies
 * each on their engine. */
EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream h)
{
	if (!e || e->magic != GEXEC_MAGIC)
		return fail(CUDA_ERROR_INVALID_HANDLE, "not an instantiated graph");
	struct CUctx_st *c;
	CUresult r = live_ctx(&c);
	if (r)
		return r;
	if (e->ctx != c)
		return fail(CUDA_ERROR_INVALID_CONTEXT, "the graph was instantiated in another context");
	struct CUstream_st *s = NULL;
	if ((r = resolve_stream(c, h, &s)))
		return r;
	spend_ns(c->launch_cost_ns);
	pthread_mutex_lock(&c->mu);
	if (c->dead) {
		pthread_mutex_unlock(&c->mu);
		return fail(CUDA_ERROR_INVALID_CONTEXT, "the context was destroyed");
	}
	if (s->capture) {
		pthread_mutex_unlock(&c->mu);
		return fail(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "launching a graph into a capturing stream is not simulated");
	}
	for (size_t i = 0; i < e->n && !r;) {
		struct node *nd = &e->nodes[i];
		if (nd->kind == KIND_KERNEL) {
			int64_t dur = 0;
			uint32_t k = 0;
			while (i < e->n && e->nodes[i].kind == KIND_KERNEL && k < MAX_REC_COUNT && dur + e->nodes[i].dur <= MAX_OP_NS) {
				dur += e->nodes[i].dur;
				k++;
				i++;
			}
			if (k == 0) { /* one node longer than what is left: on its own */
				dur = e->nodes[i].dur;
				k = 1;
				i++;
			}
			r = place(c, s, KIND_KERNEL, 0, dur, 0, k, NULL);
		} else {
			r = place(c, s, nd->kind, nd->pinned, nd->dur, nd->bytes, 1, NULL);
			i++;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return r;
}

EXPORT CUresult cuGraphExecDestroy(CUgraphExec e)
{
	if (!e || e->magic != GEXEC_MAGIC)
		return fail(CUDA_ERROR_INVALID_HANDLE, "not an instantiated graph");
	e->magic = 0;
	free(e->nodes);
	free(e);
	return CUDA_SUCCESS;
}

EXPORT CUresult cuGraphDestroy(CUgraph g)
{
	if (!g || g->magic != GRAPH_MAGIC)
		return fail(CUDA_ERROR_INVALID_HANDLE, "not a graph");
	g->magic = 0;
	free(g->nodes);
	free(g);
	return CUDA_SUCCESS;
}
