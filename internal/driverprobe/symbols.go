package driverprobe

import "github.com/gpufeed/gpufeed/internal/profile"

// entry is one probed driver entry point: its class, the copy's direction
// and form, and which argument (1-based, 0: none) holds its byte count.
type entry struct {
	sym   string
	class string
	copy  string
	async bool
	arg   int
}

// entries are the CUDA driver API's entry points probed, with the
// per-thread default-stream variants (_ptsz, _ptds) the runtime calls when
// built with --default-stream per-thread. A file that lacks one (an older
// driver, the simulated one) is probed on the rest.
var entries = func() []entry {
	var e []entry
	add := func(class string, arg int, syms ...string) {
		for _, s := range syms {
			e = append(e, entry{sym: s, class: class, arg: arg})
		}
	}
	copies := func(dir string, async bool, syms ...string) {
		for _, s := range syms {
			e = append(e, entry{sym: s, class: profile.CallCopy, copy: dir, async: async, arg: 3})
		}
	}
	add(profile.CallLaunch, 0, "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuLaunchKernelEx", "cuLaunchKernelEx_ptsz",
		"cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel_ptsz")
	add(profile.CallGraphLaunch, 0, "cuGraphLaunch", "cuGraphLaunch_ptsz")
	copies("HtoD", false, "cuMemcpyHtoD_v2", "cuMemcpyHtoD_v2_ptds")
	copies("DtoH", false, "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds")
	copies("DtoD", false, "cuMemcpyDtoD_v2", "cuMemcpyDtoD_v2_ptds")
	copies("any", false, "cuMemcpy", "cuMemcpy_ptds")
	copies("HtoD", true, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync_v2_ptsz")
	copies("DtoH", true, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync_v2_ptsz")
	copies("DtoD", true, "cuMemcpyDtoDAsync_v2", "cuMemcpyDtoDAsync_v2_ptsz")
	copies("any", true, "cuMemcpyAsync", "cuMemcpyAsync_ptsz")
	add(profile.CallAlloc, 2, "cuMemAlloc_v2", "cuMemAllocManaged", "cuMemAllocAsync", "cuMemAllocAsync_ptsz",
		"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz", "cuMemHostAlloc", "cuMemAllocHost_v2", "cuMemCreate")
	add(profile.CallFree, 0, "cuMemFree_v2", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuMemFreeHost", "cuMemRelease")
	add(profile.CallSync, 0, "cuStreamSynchronize", "cuStreamSynchronize_ptsz", "cuCtxSynchronize", "cuEventSynchronize")
	return e
}()

// launchIdx, syncIdx and otherIdx are the indexes in entries of the
// launches (probed in bursts), the synchronisations (probed on entry and
// return) and every other call (counted at entry).
var launchIdx, syncIdx, otherIdx = func() (launch, sync, other []int) {
	for i, e := range entries {
		switch e.class {
		case profile.CallLaunch:
			launch = append(launch, i)
		case profile.CallSync:
			sync = append(sync, i)
		default:
			other = append(other, i)
		}
	}
	return launch, sync, other
}()

// cookie packs an entry's index and byte-count argument for the BPF
// program (bpf/driver.bpf.c: COOKIE_INDEX, COOKIE_ARG).
func cookie(i int) uint64 { return uint64(i) | uint64(entries[i].arg)<<16 }
