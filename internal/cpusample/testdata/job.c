/* A job whose main thread launches (launch), spins in syncs (sync), spins inside the driver's
 * internal code (ctxsync), waits in the kernel in syncs (yield) or decompresses (decode), for the profiler's
 * tests. */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <zlib.h>

int cuLaunchKernel(long n);
int cuStreamSynchronize(long ns);
int cuEventSynchronize(long ns);
int cuCtxSynchronize(long ns);

/* One step of the yield mode, in a function of its own: built with frame
 * pointers (as Python 3.12 and distributions that keep them are), the
 * kernel's walk from the C library's sched_yield skips the driver, which has
 * none, and lands here. */
__attribute__((noinline)) static void yield_step(void)
{
	cuLaunchKernel(200);
	cuEventSynchronize(2000000);
	__asm__ volatile("" ::: "memory"); /* not a tail call */
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "launch";
	static unsigned char raw[1 << 20], packed[1 << 21], out[1 << 20];
	uLongf plen = sizeof packed;
	for (size_t i = 0; i < sizeof raw; i++)
		raw[i] = (unsigned char)(i * 7 % 251);
	compress(packed, &plen, raw, sizeof raw);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		if (!strcmp(mode, "launch")) {
			cuLaunchKernel(20000);
		} else if (!strcmp(mode, "sync")) {
			cuLaunchKernel(200);
			cuStreamSynchronize(2000000);
		} else if (!strcmp(mode, "ctxsync")) {
			cuLaunchKernel(200);
			cuCtxSynchronize(2000000);
		} else if (!strcmp(mode, "yield")) {
			yield_step();
		} else {
			uLongf olen = sizeof out;
			uncompress(out, &olen, packed, plen);
			cuLaunchKernel(200);
		}
	}
}
