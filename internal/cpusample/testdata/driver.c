/* A stand-in for the CUDA driver's entry points: cuLaunchKernel spends CPU
 * as a launch does, cuStreamSynchronize spins on the clock as a spinning
 * sync does. Built as libcuda.so.1 by the tests. cuCtxSynchronize spins in a
 * driver-internal function, as the released driver's entry points do; the
 * tests build the library stripped, so that function has no name. */
#include <time.h>
#include <stdint.h>
#include <sched.h>
#include <sys/ioctl.h>

static volatile uint64_t sink;

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

__attribute__((visibility("default"), noinline)) int cuLaunchKernel(long n)
{
	uint64_t x = sink;
	for (long i = 0; i < n; i++)
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	sink = x;
	return 0;
}

__attribute__((visibility("default"), noinline)) int cuStreamSynchronize(long ns)
{
	int64_t end = now_ns() + ns;
	while (now_ns() < end)
		;
	return 0;
}

/* A sync whose time is in the kernel, entered from the driver through the
 * C library's wrapper: the released driver's waits poll with ioctls on its
 * device file (here an ioctl on no file, which fails at once; a
 * sched_yield loop on an idle host is seldom sampled at all). */
/* It keeps a frame pointer, so the kernel's frame-pointer walk from the
 * wrapper (which sets up no frame) starts at this function's frame and
 * reports its caller first, skipping this function: the sampled stack's
 * return address is all that names it. */
__attribute__((visibility("default"), noinline, optimize("no-omit-frame-pointer"))) int cuEventSynchronize(long ns)
{
	int64_t end = now_ns() + ns;
	while (now_ns() < end)
		ioctl(-1, 0, 0);
	return 0;
}

/* The released driver's entry points call into unnamed internal code. */
__attribute__((noinline)) static int spin_internal(long ns)
{
	int64_t end = now_ns() + ns;
	int n = 0;
	while (now_ns() < end)
		n++;
	return n;
}

__attribute__((visibility("default"), noinline)) int cuCtxSynchronize(long ns)
{
	int n = spin_internal(ns);
	sink += (uint64_t)n; /* not a tail call: the entry point's frame stays on the stack */
	return 0;
}
