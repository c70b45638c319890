/*
 * A CUDA driver API program on the simulated device (linked against
 * libgpufeed-simcuda.so as a CUDA program links against libcuda): it makes
 * exactly the calls each line of stdin asks for, so that a test knows what
 * the probes must count. Lines:
 *   launch N     N cuLaunchKernel of 1 us kernels
 *   launchex N   N cuLaunchKernelEx
 *   graph N      N cuGraphLaunch of a captured one-kernel graph
 *   copy N       N cuMemcpyHtoD_v2 of 4096 bytes, N cuMemcpyDtoHAsync_v2 of 1000
 *   alloc N      N cuMemAlloc_v2 of 1 MiB and N cuMemFree_v2
 *   sync N MS    N times: a MS ms kernel, then cuStreamSynchronize
 *   rate S       launches as fast as it can for S seconds (a cuStreamSynchronize
 *                every 256), and prints the launches per wall second and per
 *                second of its own CPU time (what a launch costs the thread,
 *                whatever else the host runs)
 * and answers "done" (or the rate) on stdout after each.
 * Usage: workload KERNEL.ptx
 */
#define _GNU_SOURCE
#include "gpufeed_simcuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CHECK(call)                                                                             \
	do {                                                                                    \
		CUresult r_ = (call);                                                           \
		if (r_ != CUDA_SUCCESS) {                                                       \
			fprintf(stderr, "%s:%d: %s: %d: %s\n", __FILE__, __LINE__, #call, (int)r_, \
				gpufeedSimLastError());                                         \
			exit(1);                                                                \
		}                                                                               \
	} while (0)

static CUfunction kernel;
static CUstream stream;

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static void launch(unsigned long long ns)
{
	void *params[] = {&ns};
	CHECK(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
}

static double clock_s(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static double now_s(void) { return clock_s(CLOCK_MONOTONIC); }

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: workload KERNEL.ptx\n");
		return 2;
	}
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CHECK(cuInit(0));
	CHECK(cuDeviceGet(&dev, 0));
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CHECK(cuCtxSetCurrent(ctx));
	CHECK(cuModuleLoadData(&mod, slurp(argv[1])));
	CHECK(cuModuleGetFunction(&kernel, mod, GPUFEED_SIM_KERNEL_NAME));
	CHECK(cuStreamCreate(&stream, 0));
	CUdeviceptr d;
	CHECK(cuMemAlloc_v2(&d, 1 << 20));
	static char host[4096];
	CUgraph g;
	CUgraphExec ge;
	CHECK(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
	launch(1000);
	CHECK(cuStreamEndCapture(stream, &g));
	CHECK(cuGraphInstantiateWithFlags(&ge, g, 0));
	CHECK(cuStreamSynchronize(stream));
	printf("ready\n");
	fflush(stdout);

	char line[128];
	while (fgets(line, sizeof line, stdin)) {
		char op[16];
		long n = 0, ms = 0;
		double secs = 0;
		if (sscanf(line, "%15s", op) != 1)
			continue;
		if (!strcmp(op, "launch") && sscanf(line, "%*s %ld", &n) == 1) {
			for (long i = 0; i < n; i++)
				launch(1000);
		} else if (!strcmp(op, "launchex") && sscanf(line, "%*s %ld", &n) == 1) {
			CUlaunchConfig cfg;
			memset(&cfg, 0, sizeof cfg);
			cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
			cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
			cfg.hStream = stream;
			unsigned long long ns = 1000;
			void *params[] = {&ns};
			for (long i = 0; i < n; i++)
				CHECK(cuLaunchKernelEx(&cfg, kernel, params, NULL));
		} else if (!strcmp(op, "graph") && sscanf(line, "%*s %ld", &n) == 1) {
			for (long i = 0; i < n; i++)
				CHECK(cuGraphLaunch(ge, stream));
		} else if (!strcmp(op, "copy") && sscanf(line, "%*s %ld", &n) == 1) {
			for (long i = 0; i < n; i++) {
				CHECK(cuMemcpyHtoD_v2(d, host, 4096));
				CHECK(cuMemcpyDtoHAsync_v2(host, d, 1000, stream));
			}
		} else if (!strcmp(op, "alloc") && sscanf(line, "%*s %ld", &n) == 1) {
			for (long i = 0; i < n; i++) {
				CUdeviceptr p;
				CHECK(cuMemAlloc_v2(&p, 1 << 20));
				CHECK(cuMemFree_v2(p));
			}
		} else if (!strcmp(op, "sync") && sscanf(line, "%*s %ld %ld", &n, &ms) == 2) {
			for (long i = 0; i < n; i++) {
				launch((unsigned long long)ms * 1000000ull);
				CHECK(cuStreamSynchronize(stream));
			}
		} else if (!strcmp(op, "rate") && sscanf(line, "%*s %lf", &secs) == 1) {
			double t0 = now_s(), c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t;
			long count = 0;
			do {
				for (int i = 0; i < 256; i++)
					launch(0);
				CHECK(cuStreamSynchronize(stream));
				count += 256;
				t = now_s();
			} while (t - t0 < secs);
			CHECK(cuStreamSynchronize(stream));
			printf("%.1f %.1f\n", count / (t - t0), count / (clock_s(CLOCK_THREAD_CPUTIME_ID) - c0));
			fflush(stdout);
			continue;
		} else {
			fprintf(stderr, "workload: bad line %s", line);
			return 2;
		}
		CHECK(cuStreamSynchronize(stream));
		printf("done\n");
		fflush(stdout);
	}
	return 0;
}
