package cpusample

import (
	"testing"

	"github.com/gpufeed/gpufeed/internal/profile"
)

// The code a sample is charged to: glue (the C library, the vDSO, libffi
// under Python's ctypes) passes the sample to its callers, so a Python job
// driving the driver through ctypes is charged to the driver's sync.
func TestCategorize(t *testing.T) {
	for _, c := range []struct {
		kernel bool
		frames []frame
		want   profile.Category
	}{
		{false, []frame{{"[vdso]", ""}, {"libc.so.6", "clock_gettime"}, {"libgpufeed-simcuda.so", "wait_until"}}, profile.DriverSync},
		{false, []frame{{"libffi.so.8.1.2", ""}, {"_ctypes.cpython-311-x86_64-linux-gnu.so", ""}, {"libcuda.so.1", "cuLaunchKernel_ptsz"}}, profile.DriverLaunch},
		{true, []frame{{"libc.so.6", "sched_yield"}, {"libcuda.so.1", "cuStreamSynchronize"}}, profile.DriverSync},
		{true, []frame{{"libpython3.11.so.1.0", "_PyEval_EvalFrameDefault"}}, profile.Kernel},
		{false, []frame{{"libc.so.6", "__memmove_avx_unaligned_erms"}, {"libtorch_cpu.so", "x"}}, profile.Memcpy},
		{false, []frame{{"libc.so.6", "pthread_mutex_lock"}}, profile.Locks},
		{false, []frame{{"libz.so.1.2.13", "inflate_fast"}}, profile.Decode},
		{false, []frame{{"libc10.so", "c10::impl::x"}}, profile.Framework},
		{false, []frame{{"libcuda.so.1", "cuMemAlloc_v2"}}, profile.DriverOther},
		{false, []frame{{"libc.so.6", "malloc"}}, profile.Other},
	} {
		if got, _, _ := categorize(c.kernel, c.frames); got != c.want {
			t.Errorf("%v kernel=%v: %s, want %s", c.frames, c.kernel, got, c.want)
		}
	}
}
