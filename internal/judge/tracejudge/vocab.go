package tracejudge

import (
	"cmp"
	"slices"
	"strings"

	"github.com/gpufeed/gpufeed/internal/trace"
)

// vocab names runtime calls and event categories as the trace names them:
// a HIP trace's launches are hipLaunchKernel, an MTIA trace's are
// "runFunction - ...", whatever class (launch, stream sync) they share.
// Where the trace holds no call of a kind, the API family's usual name is
// used (cudaStreamSynchronize, hipStreamSynchronize), or plain words when
// the family has none.
type vocab struct {
	family family
	format string
	// seen[k] are the names of calls of kind k in scope, most frequent first.
	seen map[trace.RuntimeKind][]string
}

type family uint8

const (
	familyCUDA family = iota
	familyHIP
	familyMTIA
)

// newVocab reads the names of the runtime calls in scope. The family is
// MTIA when the backend or a launch name says so (HTA's own test:
// "mtia:hccl" in distributedInfo.backend, or a "runFunction - ..." call),
// HIP when the launch calls are hip*, CUDA otherwise.
func newVocab(t *trace.Trace, inScope func(ts int64) bool) *vocab {
	counts := map[trace.NameID]int{}
	for i := range t.Runtime {
		if r := &t.Runtime[i]; inScope(r.Start) {
			counts[r.Name]++
		}
	}
	v := &vocab{format: t.Format, seen: map[trace.RuntimeKind][]string{}}
	byKind := map[trace.RuntimeKind][]trace.NameID{}
	var hip, cuda, mtia int
	for id, n := range counts {
		name := t.Name(id)
		k := trace.ClassifyRuntime(name)
		byKind[k] = append(byKind[k], id)
		switch {
		case strings.HasPrefix(name, "runFunction"):
			mtia += n
		case strings.HasPrefix(name, "hip"):
			hip += n
		case strings.HasPrefix(name, "cu"):
			cuda += n
		}
	}
	switch {
	case strings.Contains(t.Meta.Backend, "mtia") || mtia > 0:
		v.family = familyMTIA
	case hip > cuda:
		v.family = familyHIP
	}
	for k, ids := range byKind {
		slices.SortFunc(ids, func(a, b trace.NameID) int {
			if c := cmp.Compare(counts[b], counts[a]); c != 0 {
				return c
			}
			return cmp.Compare(t.Name(a), t.Name(b))
		})
		for _, id := range ids {
			v.seen[k] = append(v.seen[k], t.Name(id))
		}
	}
	return v
}

// usual are the names each family's runtime gives to each kind of call.
var usual = map[family]map[trace.RuntimeKind]string{
	familyCUDA: {
		trace.Launch: "cudaLaunchKernel", trace.MemcpyAsync: "cudaMemcpyAsync", trace.MemsetAsync: "cudaMemsetAsync",
		trace.MemcpySync: "cudaMemcpy", trace.MemsetSync: "cudaMemset", trace.StreamSync: "cudaStreamSynchronize",
		trace.DeviceSync: "cudaDeviceSynchronize", trace.EventSync: "cudaEventSynchronize", trace.StreamWaitEvent: "cudaStreamWaitEvent",
	},
	familyHIP: {
		trace.Launch: "hipLaunchKernel", trace.MemcpyAsync: "hipMemcpyAsync", trace.MemsetAsync: "hipMemsetAsync",
		trace.MemcpySync: "hipMemcpy", trace.MemsetSync: "hipMemset", trace.StreamSync: "hipStreamSynchronize",
		trace.DeviceSync: "hipDeviceSynchronize", trace.EventSync: "hipEventSynchronize", trace.StreamWaitEvent: "hipStreamWaitEvent",
	},
	familyMTIA: {
		trace.Launch: "runFunction - job_prep_and_submit_for_execution", trace.MemcpyAsync: "enqueueCommand memcpyHtoDAsync",
		trace.StreamSync: "synchronizeStream", trace.StreamWaitEvent: "enqueueCommand waitOnEvent",
	},
}

// words describe a kind of call when the family has no usual name for it.
var words = map[trace.RuntimeKind]string{
	trace.Launch: "kernel launch calls", trace.MemcpyAsync: "async copy calls", trace.MemsetAsync: "async memset calls",
	trace.MemcpySync: "blocking copy calls", trace.MemsetSync: "blocking memset calls", trace.StreamSync: "stream synchronisation calls",
	trace.DeviceSync: "device synchronisation calls", trace.EventSync: "event synchronisation calls", trace.StreamWaitEvent: "stream-wait calls",
}

// maxNames bounds how many names a list gives.
const maxNames = 4

// calls names the calls of the given kinds: those the trace holds, most
// frequent first, else the family's usual names.
func (v *vocab) calls(kinds ...trace.RuntimeKind) string {
	var out []string
	for _, k := range kinds {
		out = append(out, v.seen[k]...)
	}
	if len(out) == 0 {
		for _, k := range kinds {
			if n, ok := usual[v.family][k]; ok {
				out = append(out, n)
			}
		}
	}
	if len(out) == 0 {
		for _, k := range kinds {
			out = append(out, words[k])
		}
	}
	out = slices.Compact(out)
	if len(out) > maxNames {
		out = append(out[:maxNames], "…")
	}
	return strings.Join(out, ", ")
}

// call names the one call of a kind to recommend: the family's usual name.
func (v *vocab) call(k trace.RuntimeKind) string {
	if n, ok := usual[v.family][k]; ok {
		return n
	}
	if s := v.seen[k]; len(s) > 0 {
		return s[0]
	}
	return words[k]
}

// api names the runtime: "CUDA", "HIP", "MTIA runtime".
func (v *vocab) api() string {
	switch v.family {
	case familyHIP:
		return "HIP"
	case familyMTIA:
		return "MTIA runtime"
	}
	return "CUDA"
}

// gpuEvents names the events GPU operations come from.
func (v *vocab) gpuEvents() string {
	switch {
	case v.format == "nsys":
		return "CUPTI kernel, memcpy and memset activity"
	case v.family == familyMTIA:
		return "mtia_ccp_events"
	}
	return "kernel, gpu_memcpy, gpu_memset"
}

// runtimeEvents names the events runtime calls come from.
func (v *vocab) runtimeEvents() string {
	switch {
	case v.format == "nsys":
		return "CUPTI runtime activity"
	case v.family == familyMTIA:
		return "mtia_runtime"
	}
	return "cuda_runtime"
}

// copyOps names host-device copy operations.
func (v *vocab) copyOps() string {
	if v.family == familyMTIA {
		return "dma_request (HOST_TO_DEVICE, DEVICE_TO_HOST)"
	}
	return "Memcpy HtoD, Memcpy DtoH"
}

// launchAdvice is what cuts launch overhead on the trace's runtime: graphs
// where the runtime has them (CUDA graphs; HIP graphs, which PyTorch's
// torch.cuda.graphs drives on ROCm), fusion and bigger batches everywhere.
func (v *vocab) launchAdvice() string {
	switch v.family {
	case familyHIP:
		return "Cut launch overhead: capture the step in a HIP graph (torch.cuda.graphs works on ROCm, as does torch.compile(mode=\"reduce-overhead\")), fuse small operations (torch.compile), raise the batch size, move Python logic out of the hot loop."
	case familyMTIA:
		return "Cut launch overhead: fuse small operations (torch.compile), raise the batch size, move Python logic out of the hot loop."
	}
	return "Cut launch overhead: capture the step in a CUDA graph (torch.compile(mode=\"reduce-overhead\") or torch.cuda.graphs), fuse small operations (torch.compile), raise the batch size, move Python logic out of the hot loop."
}

// kernelEvents, copyEvents and nonComputeEvents name the events kernels,
// copies and non-compute operations come from.
func (v *vocab) kernelEvents() string {
	switch {
	case v.format == "nsys":
		return "CUPTI kernel activity"
	case v.family == familyMTIA:
		return "mtia_ccp_events"
	}
	return "kernel"
}

func (v *vocab) copyEvents() string {
	switch {
	case v.format == "nsys":
		return "CUPTI memcpy activity"
	case v.family == familyMTIA:
		return "mtia_ccp_events dma_request"
	}
	return "gpu_memcpy"
}

func (v *vocab) nonComputeEvents() string {
	switch {
	case v.format == "nsys":
		return "CUPTI memcpy and memset activity, collective kernels"
	case v.family == familyMTIA:
		return "mtia_ccp_events dma_request, collective kernels"
	}
	return "gpu_memcpy, gpu_memset, nccl kernels"
}

// countLabel labels a count of calls of one kind: "cudaStreamSynchronize
// calls", or the plain words when the runtime has no such call.
func (v *vocab) countLabel(k trace.RuntimeKind) string {
	_, usualName := usual[v.family][k]
	if len(v.seen[k]) == 0 && !usualName {
		return words[k]
	}
	return v.calls(k) + " calls"
}
