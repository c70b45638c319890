/*
 * A C program linked against libgpufeed-simcuda.so, as a CUDA program links
 * against libcuda: it checks the driver API's behaviour on a simulated
 * device with two GPUs and 16 pending operations per stream, served by the
 * Go test that builds and runs it (simcuda_test.go). Usage:
 * driver_test KERNEL.ptx
 */
#define _GNU_SOURCE
#include "gpufeed_simcuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int failures;

#define CHECK(call)                                                                              \
	do {                                                                                     \
		CUresult r_ = (call);                                                            \
		if (r_ != CUDA_SUCCESS) {                                                        \
			const char *n_ = "?";                                                    \
			cuGetErrorName(r_, &n_);                                                 \
			fprintf(stderr, "%s:%d: %s: %s (%d): %s\n", __FILE__, __LINE__, #call, n_, \
				(int)r_, gpufeedSimLastError());                                 \
			exit(1);                                                                 \
		}                                                                                \
	} while (0)

#define EXPECT(cond, ...)                                                     \
	do {                                                                  \
		if (!(cond)) {                                                \
			fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                         \
			fputc('\n', stderr);                                  \
			failures++;                                           \
		}                                                             \
	} while (0)

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static CUfunction kernel;

static void launch(CUstream s, unsigned long long ns)
{
	void *params[] = {&ns};
	CHECK(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, s, params, NULL));
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		exit(1);
	}
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	return buf;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: driver_test KERNEL.ptx\n");
		return 2;
	}
	const unsigned long long ms = 1000000ULL;

	EXPECT(cuDeviceGetCount(&(int){0}) == CUDA_ERROR_NOT_INITIALIZED, "cuDeviceGetCount before cuInit");
	CHECK(cuInit(0));
	int n = 0;
	CHECK(cuDeviceGetCount(&n));
	EXPECT(n == 2, "%d devices, want 2", n);
	CUdevice dev;
	EXPECT(cuDeviceGet(&dev, 2) == CUDA_ERROR_INVALID_DEVICE, "device 2 of 2");
	CHECK(cuDeviceGet(&dev, 1));
	char name[64];
	CHECK(cuDeviceGetName(name, sizeof name, dev));
	EXPECT(strstr(name, "simulated") != NULL, "device name %s", name);

	/* The primary context, with blocking synchronisation. */
	CHECK(cuDevicePrimaryCtxSetFlags_v2(dev, CU_CTX_SCHED_BLOCKING_SYNC));
	EXPECT(cuDevicePrimaryCtxSetFlags_v2(dev, CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD) == CUDA_ERROR_INVALID_VALUE, "two scheduling flags");
	CUcontext ctx;
	CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
	EXPECT(cuStreamSynchronize(NULL) == CUDA_ERROR_INVALID_CONTEXT, "no current context yet");
	CHECK(cuCtxSetCurrent(ctx));
	gpufeedSimInfo info = {.size = sizeof info};
	CHECK(gpufeedSimCtxGetInfo(NULL, &info));
	EXPECT(info.pid == getpid(), "the device sees pid %d, this is %d", info.pid, getpid());
	EXPECT(info.ordinal == 1 && info.devices == 2, "ordinal %d of %d", info.ordinal, info.devices);
	EXPECT(info.schedResolved == CU_CTX_SCHED_BLOCKING_SYNC, "waits by %u", info.schedResolved);
	EXPECT(info.maxPending == 16, "max pending %u", info.maxPending);
	unsigned int flags = 99;
	int active = 0;
	CHECK(cuDevicePrimaryCtxGetState(dev, &flags, &active));
	EXPECT(flags == CU_CTX_SCHED_BLOCKING_SYNC && active, "state %u %d", flags, active);

	/* Modules are PTX text. */
	CUmodule mod;
	CHECK(cuModuleLoadData(&mod, slurp(argv[1])));
	CHECK(cuModuleGetFunction(&kernel, mod, GPUFEED_SIM_KERNEL_NAME));
	CUfunction none;
	EXPECT(cuModuleGetFunction(&none, mod, "nope") == CUDA_ERROR_NOT_FOUND, "a missing kernel");
	CUmodule bad;
	EXPECT(cuModuleLoadData(&bad, "\x7f" "ELF....") == CUDA_ERROR_INVALID_IMAGE, "a cubin");
	EXPECT(cuModuleLoadData(&bad, "// no entry here") == CUDA_ERROR_INVALID_IMAGE, "PTX without a kernel");
	CUmodule two;
	CHECK(cuModuleLoadData(&two, ".version 7.0\n.target sm_80\n.address_size 64\n"
				     ".visible .entry a(.param .u32 x) { ret; }\n"
				     ".entry b(\n\t.param .align 8 .b64 p, .param .u32 q) { ret; }\n"));
	CUfunction fa, fb;
	CHECK(cuModuleGetFunction(&fa, two, "a"));
	CHECK(cuModuleGetFunction(&fb, two, "b"));

	/* Kernels run back to back on a stream; events time them. */
	CUstream s;
	CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
	CUevent e0, e1;
	CHECK(cuEventCreate(&e0, CU_EVENT_DEFAULT));
	CHECK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
	double t0 = now_ms();
	CHECK(cuEventRecord(e0, s));
	for (int i = 0; i < 3; i++)
		launch(s, 10 * ms);
	CHECK(cuEventRecord(e1, s));
	EXPECT(cuStreamQuery(s) == CUDA_ERROR_NOT_READY, "the stream is not done at once");
	EXPECT(cuEventQuery(e1) == CUDA_ERROR_NOT_READY, "the event is not done at once");
	float el = 0;
	EXPECT(cuEventElapsedTime(&el, e0, e1) == CUDA_ERROR_NOT_READY, "elapsed time of an unfinished event");
	EXPECT(now_ms() - t0 < 5, "three launches took %.2f ms", now_ms() - t0);
	CHECK(cuEventSynchronize(e1));
	double waited = now_ms() - t0;
	EXPECT(waited >= 30, "event synchronize returned after %.2f ms, want >= 30", waited);
	CHECK(cuEventElapsedTime(&el, e0, e1));
	EXPECT(el >= 30 && el < 31, "three 10 ms kernels took %.3f ms between events", el);
	EXPECT(cuStreamQuery(s) == CUDA_SUCCESS, "the stream is done");

	/* A kernel without a duration parameter runs for no time; the packed
	 * parameter buffer of extra carries one as well as kernelParams. */
	CHECK(cuLaunchKernel(fa, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
	unsigned long long packed[2] = {5 * ms, 0};
	size_t packed_size = sizeof packed;
	void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size, CU_LAUNCH_PARAM_END};
	CHECK(cuEventRecord(e0, s));
	CHECK(cuLaunchKernel(fb, 1, 1, 1, 1, 1, 1, 0, s, NULL, extra));
	CHECK(cuEventRecord(e1, s));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuEventElapsedTime(&el, e0, e1));
	EXPECT(el >= 5 && el < 5.5, "a 5 ms kernel through extra took %.3f ms", el);
	EXPECT(cuLaunchKernel(kernel, 0, 1, 1, 1, 1, 1, 0, s, NULL, NULL) == CUDA_ERROR_INVALID_VALUE, "a zero grid");
	unsigned long long hours = 2ULL * 3600 * 1000 * ms;
	void *hp[] = {&hours};
	EXPECT(cuLaunchKernel(kernel, 1, 1, 1, 1, 1, 1, 0, s, hp, NULL) == CUDA_ERROR_INVALID_VALUE, "a two-hour kernel");

	/* cuLaunchKernelEx. */
	CUlaunchConfig cfg = {.gridDimX = 4, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1, .hStream = s};
	unsigned long long d2 = 2 * ms;
	void *p2[] = {&d2};
	CHECK(cuEventRecord(e0, s));
	CHECK(cuLaunchKernelEx(&cfg, kernel, p2, NULL));
	CHECK(cuEventRecord(e1, s));
	CHECK(cuStreamSynchronize(s));
	CHECK(cuEventElapsedTime(&el, e0, e1));
	EXPECT(el >= 2 && el < 2.5, "cuLaunchKernelEx of 2 ms took %.3f ms", el);

	/* Another stream waits for an event of the first. */
	CUstream s2;
	CHECK(cuStreamCreate(&s2, 0));
	launch(s, 20 * ms);
	CHECK(cuEventRecord(e0, s));
	CHECK(cuStreamWaitEvent(s2, e0, 0));
	launch(s2, ms);
	CHECK(cuEventRecord(e1, s2));
	unsigned long long a, b;
	CHECK(gpufeedSimEventTime(e0, &a));
	CHECK(gpufeedSimEventTime(e1, &b));
	EXPECT(b >= a + ms, "the waiting stream's kernel ended %.3f ms after the event, want >= 1", (double)(b - a) / 1e6);
	CHECK(cuCtxSynchronize());

	/* Stream capture: ten 1 ms kernels, one graph launch. */
	CUgraph g;
	CUgraphExec ge;
	EXPECT(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "capturing the legacy stream");
	CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
	CUstreamCaptureStatus cs;
	CHECK(cuStreamIsCapturing(s, &cs));
	EXPECT(cs == CU_STREAM_CAPTURE_STATUS_ACTIVE, "capture status %d", (int)cs);
	for (int i = 0; i < 10; i++)
		launch(s, ms);
	EXPECT(cuStreamSynchronize(s) == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "synchronising a capturing stream");
	CHECK(cuStreamEndCapture(s, &g));
	EXPECT(cuStreamQuery(s) == CUDA_SUCCESS, "capture queued nothing");
	CHECK(cuGraphInstantiateWithFlags(&ge, g, 0));
	CHECK(cuEventRecord(e0, s2));
	t0 = now_ms();
	CHECK(cuGraphLaunch(ge, s2));
	double launch_ms = now_ms() - t0;
	CHECK(cuEventRecord(e1, s2));
	CHECK(cuStreamSynchronize(s2));
	CHECK(cuEventElapsedTime(&el, e0, e1));
	EXPECT(el >= 10 && el < 10.5, "a graph of ten 1 ms kernels took %.3f ms", el);
	EXPECT(launch_ms < 1, "the graph launch took %.3f ms", launch_ms);
	CHECK(cuGraphExecDestroy(ge));
	CHECK(cuGraphDestroy(g));

	/* Copies: pinned asynchronous ones return at once, pageable ones block. */
	size_t big = 64 << 20;
	double copy_ms = (double)big / (info.bandwidth[0] * info.pageableFactor) * 1e3;
	CUdeviceptr dptr;
	CHECK(cuMemAlloc_v2(&dptr, big));
	void *pinned;
	CHECK(cuMemHostAlloc(&pinned, big, 0));
	char *pageable = malloc(big);
	memset(pageable, 1, big);
	t0 = now_ms();
	CHECK(cuMemcpyHtoDAsync_v2(dptr, pinned, big, s));
	EXPECT(now_ms() - t0 < copy_ms / 4, "an async copy from pinned memory took %.2f ms", now_ms() - t0);
	CHECK(cuStreamSynchronize(s));
	t0 = now_ms();
	CHECK(cuMemcpyHtoD_v2(dptr, pageable, big));
	EXPECT(now_ms() - t0 >= copy_ms, "a pageable copy returned after %.2f ms, want >= %.2f", now_ms() - t0, copy_ms);
	t0 = now_ms();
	CHECK(cuMemcpyHtoDAsync_v2(dptr, pageable, big, s));
	EXPECT(now_ms() - t0 >= copy_ms, "an async copy from pageable memory returned after %.2f ms, want >= %.2f", now_ms() - t0, copy_ms);
	CHECK(cuMemHostRegister_v2(pageable, big, 0));
	EXPECT(cuMemHostRegister_v2(pageable + 4096, 4096, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "registering twice");
	t0 = now_ms();
	CHECK(cuMemcpyDtoHAsync_v2(pageable, dptr, big, s));
	EXPECT(now_ms() - t0 < copy_ms / 4, "an async copy into registered memory took %.2f ms", now_ms() - t0);
	CHECK(cuMemHostUnregister(pageable));
	EXPECT(cuMemHostUnregister(pageable) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "unregistering twice");
	CHECK(cuCtxSynchronize());
	EXPECT(cuMemFree_v2(dptr + 8) == CUDA_ERROR_INVALID_VALUE, "freeing what was not allocated");
	size_t freeb, total;
	CHECK(cuMemGetInfo_v2(&freeb, &total));
	EXPECT(total - freeb == big, "%zu bytes in use, want %zu", total - freeb, big);
	CHECK(cuMemFree_v2(dptr));
	CHECK(cuMemFreeHost(pinned));
	free(pageable);

	/* A full stream (16 pending here) blocks the launch until one ends. */
	t0 = now_ms();
	for (int i = 0; i < 20; i++)
		launch(s, 5 * ms);
	waited = now_ms() - t0;
	EXPECT(waited >= 20, "20 launches of 5 ms into a 16-deep stream returned after %.2f ms, want >= 20", waited);
	CHECK(cuStreamSynchronize(s));

	/* A context of its own, spinning. */
	CUcontext own;
	CHECK(cuCtxCreate_v2(&own, CU_CTX_SCHED_SPIN, dev));
	CUcontext cur;
	CHECK(cuCtxGetCurrent(&cur));
	EXPECT(cur == own, "cuCtxCreate makes the new context current");
	CHECK(gpufeedSimCtxGetInfo(own, &info));
	EXPECT(info.schedResolved == CU_CTX_SCHED_SPIN, "waits by %u", info.schedResolved);
	CHECK(cuCtxDestroy_v2(own));
	CHECK(cuCtxGetCurrent(&cur));
	EXPECT(cur == NULL || cur == ctx, "after destroying the current context");
	CHECK(cuCtxSetCurrent(ctx));

	/* After fork the child's inherited context is not its own; it can make one. */
	launch(s, 50 * ms);
	pid_t pid = fork();
	if (pid == 0) {
		CUresult inherited = cuStreamSynchronize(s);
		int bad = inherited != CUDA_ERROR_NOT_INITIALIZED;
		if (bad)
			fprintf(stderr, "child: the inherited context answered %d (%s)\n", (int)inherited, gpufeedSimLastError());
		CUcontext c2;
		CHECK(cuDevicePrimaryCtxRetain(&c2, dev));
		CHECK(cuCtxSetCurrent(c2));
		CHECK(gpufeedSimCtxGetInfo(NULL, &info));
		if (info.pid != getpid()) {
			fprintf(stderr, "child: the device sees pid %d, the child is %d\n", info.pid, getpid());
			bad = 1;
		}
		CUfunction k2;
		CUmodule m2;
		CHECK(cuModuleLoadData(&m2, slurp(argv[1])));
		CHECK(cuModuleGetFunction(&k2, m2, GPUFEED_SIM_KERNEL_NAME));
		kernel = k2;
		launch(NULL, ms);
		CHECK(cuCtxSynchronize());
		_exit(bad ? 3 : 0);
	}
	int st;
	waitpid(pid, &st, 0);
	EXPECT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the forked child: status %d", st);
	CHECK(cuStreamSynchronize(s)); /* the parent's context is untouched */

	const char *en;
	CHECK(cuGetErrorName(CUDA_ERROR_NOT_READY, &en));
	EXPECT(strcmp(en, "CUDA_ERROR_NOT_READY") == 0, "error name %s", en);
	CHECK(cuDevicePrimaryCtxRelease_v2(dev));
	EXPECT(cuStreamSynchronize(s) != CUDA_SUCCESS, "a released context still works");

	if (failures) {
		fprintf(stderr, "%d checks failed\n", failures);
		return 1;
	}
	printf("ok\n");
	return 0;
}
