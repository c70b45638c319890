package trace

import "testing"

func TestClassifyRuntime(t *testing.T) {
	for name, want := range map[string]RuntimeKind{
		"cudaLaunchKernel":            Launch,
		"cudaLaunchKernelExC":         Launch,
		"cudaLaunchKernel_v7000":      Launch,
		"cuLaunchKernel":              Launch,
		"hipLaunchKernel":             Launch,
		"hipExtModuleLaunchKernel":    Launch,
		"cudaGraphLaunch":             Launch,
		"cudaMemcpyAsync":             MemcpyAsync,
		"cudaMemcpyAsync_v3020":       MemcpyAsync,
		"hipMemcpyAsync":              MemcpyAsync,
		"cudaMemcpy":                  MemcpySync,
		"cudaMemcpy2D":                MemcpySync,
		"hipMemcpyWithStream":         MemcpySync,
		"cudaMemsetAsync":             MemsetAsync,
		"cudaMemset":                  MemsetSync,
		"cudaStreamSynchronize":       StreamSync,
		"cudaStreamSynchronize_ptsz":  StreamSync,
		"cudaStreamSynchronize_v3020": StreamSync,
		"hipDeviceSynchronize":        DeviceSync,
		"cudaDeviceSynchronize":       DeviceSync,
		"cuCtxSynchronize":            DeviceSync,
		"cudaEventSynchronize":        EventSync,
		"cudaStreamWaitEvent":         StreamWaitEvent,
		"cudaEventRecord":             RuntimeOther,
		"cudaMalloc":                  RuntimeOther,
		"aten::add":                   RuntimeOther,
		"":                            RuntimeOther,
		// MTIA runtime names (Kineto's mtia_runtime category).
		"runFunction - job_prep_and_submit_for_execution": Launch,
		"enqueueCommand memcpyHtoDAsync":                  MemcpyAsync,
		"enqueueCommand memcpyDtoHAsync":                  MemcpyAsync,
		"enqueueCommand waitOnEvent":                      StreamWaitEvent,
		"synchronizeStream":                               StreamSync,
		"synchronize":                                     RuntimeOther,
		"recordEvent":                                     RuntimeOther,
	} {
		if got := ClassifyRuntime(name); got != want {
			t.Errorf("ClassifyRuntime(%q) = %s, want %s", name, got, want)
		}
	}
	if !MemcpySync.IsSync() || MemcpyAsync.IsSync() || !Launch.Enqueues() || StreamSync.Enqueues() {
		t.Error("kind predicates wrong")
	}
}

func TestClassifyCPU(t *testing.T) {
	for name, want := range map[string]CPUKind{
		"ProfilerStep#551": Step,
		"enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__":   DataLoaderNext,
		"enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__": DataLoaderNext,
		"Optimizer.step#SGD.step":                                       OptimizerStep,
		"Optimizer.zero_grad#AdamW.zero_grad":                           OptimizerStep,
		"aten::mm":                                                      Operator,
	} {
		if got := ClassifyCPU(name, Operator); got != want {
			t.Errorf("ClassifyCPU(%q) = %s, want %s", name, got, want)
		}
	}
	for name, want := range map[string]int{"ProfilerStep#12": 12, "ProfilerStep#": -1, "ProfilerStep#x": -1, "aten::mm": -1, "ProfilerStep#7 (x)": 7} {
		if got := StepNumber(name); got != want {
			t.Errorf("StepNumber(%q) = %d, want %d", name, got, want)
		}
	}
}

func TestParseCopyName(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dir      CopyKind
		src, dst MemKind
	}{
		{"Memcpy HtoD (Pageable -> Device)", HtoD, Pageable, DeviceMem},
		{"Memcpy DtoH (Device -> Pinned)", DtoH, DeviceMem, Pinned},
		{"Memcpy DtoD (Device -> Device)", DtoD, DeviceMem, DeviceMem},
		{"Memcpy HtoD (Host -> Device)", HtoD, HostMem, DeviceMem},
		{"Memcpy PtoP (Device -> Device)", PtoP, DeviceMem, DeviceMem},
		{"Memset (Device)", CopyUnknown, MemUnknown, DeviceMem},
		{"Memcpy HtoD", HtoD, MemUnknown, MemUnknown},
		{"weird)(", CopyUnknown, MemUnknown, MemUnknown},
	} {
		dir, src, dst := ParseCopyName(tc.name)
		if dir != tc.dir || src != tc.src || dst != tc.dst {
			t.Errorf("ParseCopyName(%q) = %s %s %s, want %s %s %s", tc.name, dir, src, dst, tc.dir, tc.src, tc.dst)
		}
	}
}

func TestFinishSortsAndLinks(t *testing.T) {
	b := NewBuilder("x", "kineto")
	th := b.Thread(1, 1)
	s := b.Stream(0, 7)
	k := b.Intern("k")
	l := b.Intern("cudaLaunchKernel")
	b.AddGPU(GPUOp{Start: 50, End: 60, Corr: 2, Name: k, Stream: s})
	b.AddGPU(GPUOp{Start: 20, End: 30, Corr: 1, Name: k, Stream: s})
	b.AddGPU(GPUOp{Start: 70, End: 80, Corr: 9, Name: k, Stream: s}) // no call
	b.AddRuntime(RuntimeCall{Start: 40, End: 45, Corr: 2, Name: l, Thread: th, Kind: Launch})
	b.AddRuntime(RuntimeCall{Start: 10, End: 15, Corr: 1, Name: l, Thread: th, Kind: Launch})
	b.AddRuntime(RuntimeCall{Start: 41, End: 42, Corr: 2, Name: l, Thread: th, Kind: Launch}) // duplicate id
	tr := b.Finish()
	if err := tr.Check(); err != nil {
		t.Fatal(err)
	}
	if tr.GPU[0].Start != 20 || tr.GPU[0].Launch != 0 || tr.Runtime[0].Start != 10 || tr.Runtime[0].GPU != 0 {
		t.Errorf("not sorted and linked: %+v %+v", tr.GPU, tr.Runtime)
	}
	if tr.GPU[1].Launch != -1 || tr.Runtime[1].Start != 40 {
		t.Errorf("an op whose correlation id two calls have must stay unlinked (TestNonUniqueCorrelationIDs): %+v", tr.GPU[1])
	}
	if tr.Counts.Unlinked != 1 || tr.Counts.DuplicateCorr != 1 || tr.Counts.AmbiguousCorr != 1 {
		t.Errorf("counts = %+v", tr.Counts)
	}
}

func TestClassifyMTIAOp(t *testing.T) {
	for name, want := range map[string]GPUKind{
		"dma_request":                         Memcpy,
		"event_wait":                          GPUSync,
		"event_record":                        GPUSync,
		"fc-dtype_Float":                      Kernel,
		"pe_exe":                              Kernel,
		"aten::cat.out-dtype_Long-extraKey_1": Kernel,
	} {
		if got := ClassifyMTIAOp(name); got != want {
			t.Errorf("ClassifyMTIAOp(%q) = %s, want %s", name, got, want)
		}
	}
	if ParseMTIADirection("HOST_TO_DEVICE") != HtoD || ParseMTIADirection("DEVICE_TO_HOST") != DtoH || ParseMTIADirection("x") != CopyUnknown {
		t.Error("ParseMTIADirection wrong")
	}
}
