// Package cudadrv calls a CUDA driver API library loaded with dlopen: the
// real one (libcuda.so.1) on a GPU host, or gpufeed's simulated driver
// (libgpufeed-simcuda.so, internal/sim/simcuda) anywhere else, through
// the same code path. It binds the calls gpufeed's workloads and drills
// make, by their exported names, with CUDA's C signatures.
//
// CUDA's current context is per OS thread and goroutines move between
// threads, so every call that works on a context makes it current first,
// in the same C call.
package cudadrv

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

typedef struct {
	unsigned int size;
	int pid, ordinal, devices;
	unsigned int schedFlags, schedResolved, maxPending, reserved;
	unsigned long long launchCostNs;
	double bandwidth[3];
	double pageableFactor;
} gf_siminfo_t;

typedef CUresult (*fn_u)(unsigned int);
typedef CUresult (*fn_pi)(int *);
typedef CUresult (*fn_pdevi)(int *, int);
typedef CUresult (*fn_simdev)(int *, const char *, int);
typedef CUresult (*fn_devu)(int, unsigned int);
typedef CUresult (*fn_dev)(int);
typedef CUresult (*fn_pctxdev)(void **, int);
typedef CUresult (*fn_pctxudev)(void **, unsigned int, int);
typedef CUresult (*fn_p)(void *);
typedef CUresult (*fn_pp)(void **);
typedef CUresult (*fn_v)(void);
typedef CUresult (*fn_modload)(void **, const void *);
typedef CUresult (*fn_getfunc)(void **, void *, const char *);
typedef CUresult (*fn_ppu)(void **, unsigned int);
typedef CUresult (*fn_pp2)(void *, void *);
typedef CUresult (*fn_launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
typedef CUresult (*fn_memalloc)(CUdeviceptr *, size_t);
typedef CUresult (*fn_memfree)(CUdeviceptr);
typedef CUresult (*fn_hostalloc)(void **, size_t, unsigned int);
typedef CUresult (*fn_htod)(CUdeviceptr, const void *, size_t, void *);
typedef CUresult (*fn_dtoh)(void *, CUdeviceptr, size_t, void *);
typedef CUresult (*fn_dtod)(CUdeviceptr, CUdeviceptr, size_t, void *);
typedef CUresult (*fn_htod_sync)(CUdeviceptr, const void *, size_t);
typedef CUresult (*fn_dtoh_sync)(void *, CUdeviceptr, size_t);
typedef CUresult (*fn_elapsed)(float *, void *, void *);
typedef CUresult (*fn_evtime)(void *, unsigned long long *);
typedef CUresult (*fn_capture)(void *, int);
typedef CUresult (*fn_instantiate)(void **, void *, unsigned long long);
typedef CUresult (*fn_waitev)(void *, void *, unsigned int);
typedef CUresult (*fn_name)(CUresult, const char **);
typedef const char *(*fn_lasterr)(void);
typedef CUresult (*fn_siminfo)(void *, gf_siminfo_t *);
typedef CUresult (*fn_devname)(char *, int, int);
typedef CUresult (*fn_busid)(char *, int, int);
typedef CUresult (*fn_allochost)(void **, size_t);

static void *gf_open(const char *path, char **err) {
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) *err = strdup(dlerror());
	return h;
}
static void *gf_sym(void *h, const char *name) { return dlsym(h, name); }

static CUresult gf_init(void *f) { return ((fn_u)f)(0); }
static CUresult gf_count(void *f, int *n) { return ((fn_pi)f)(n); }
static CUresult gf_devget(void *f, int *d, int i) { return ((fn_pdevi)f)(d, i); }
static CUresult gf_simdevget(void *f, int *d, const char *p, int i) { return ((fn_simdev)f)(d, p, i); }
static CUresult gf_devu(void *f, int d, unsigned int u) { return ((fn_devu)f)(d, u); }
static CUresult gf_dev(void *f, int d) { return ((fn_dev)f)(d); }
static CUresult gf_retain(void *f, void **c, int d) { return ((fn_pctxdev)f)(c, d); }
static CUresult gf_ctxcreate(void *f, void *pop, void **c, unsigned int flags, int d) {
	CUresult r = ((fn_pctxudev)f)(c, flags, d);
	if (r == 0) { void *x; ((fn_pp)pop)(&x); } // cuCtxCreate pushes it: the binding sets contexts per call
	return r;
}
static CUresult gf_p(void *f, void *p) { return ((fn_p)f)(p); }
static CUresult gf_freehost(void *f, uintptr_t p) { return ((fn_p)f)((void *)p); }

// The calls below make ctx current on this thread first.
#define CUR(set, ctx) do { CUresult _r = ((fn_p)(set))(ctx); if (_r) return _r; } while (0)
static CUresult gf_ctx_v(void *set, void *ctx, void *f) { CUR(set, ctx); return ((fn_v)f)(); }
static CUresult gf_ctx_p(void *set, void *ctx, void *f, void *p) { CUR(set, ctx); return ((fn_p)f)(p); }
static CUresult gf_modload(void *set, void *ctx, void *f, void **m, const char *img) { CUR(set, ctx); return ((fn_modload)f)(m, img); }
static CUresult gf_getfunc(void *f, void **fn, void *m, const char *name) { return ((fn_getfunc)f)(fn, m, name); }
static CUresult gf_ctx_ppu(void *set, void *ctx, void *f, void **p, unsigned int u) { CUR(set, ctx); return ((fn_ppu)f)(p, u); }
static CUresult gf_ctx_pp2(void *set, void *ctx, void *f, void *a, void *b) { CUR(set, ctx); return ((fn_pp2)f)(a, b); }
static CUresult gf_launch1(void *set, void *ctx, void *f, void *fn, void *stream, uint64_t arg) {
	CUR(set, ctx);
	void *params[1] = {&arg};
	return ((fn_launch)f)(fn, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}
static CUresult gf_memalloc(void *set, void *ctx, void *f, CUdeviceptr *p, size_t n) { CUR(set, ctx); return ((fn_memalloc)f)(p, n); }
static CUresult gf_memfree(void *set, void *ctx, void *f, CUdeviceptr p) { CUR(set, ctx); return ((fn_memfree)f)(p); }
static CUresult gf_hostalloc(void *set, void *ctx, void *f, void **p, size_t n) { CUR(set, ctx); return ((fn_hostalloc)f)(p, n, 0); }
static CUresult gf_htod(void *set, void *ctx, void *f, CUdeviceptr d, uintptr_t h, size_t n, void *s) { CUR(set, ctx); return ((fn_htod)f)(d, (const void *)h, n, s); }
static CUresult gf_dtoh(void *set, void *ctx, void *f, uintptr_t h, CUdeviceptr d, size_t n, void *s) { CUR(set, ctx); return ((fn_dtoh)f)((void *)h, d, n, s); }
static CUresult gf_dtod(void *set, void *ctx, void *f, CUdeviceptr a, CUdeviceptr b, size_t n, void *s) { CUR(set, ctx); return ((fn_dtod)f)(a, b, n, s); }
static CUresult gf_htod_sync(void *set, void *ctx, void *f, CUdeviceptr d, uintptr_t h, size_t n) { CUR(set, ctx); return ((fn_htod_sync)f)(d, (const void *)h, n); }
static CUresult gf_dtoh_sync(void *set, void *ctx, void *f, uintptr_t h, CUdeviceptr d, size_t n) { CUR(set, ctx); return ((fn_dtoh_sync)f)((void *)h, d, n); }
static CUresult gf_elapsed(void *f, float *ms, void *a, void *b) { return ((fn_elapsed)f)(ms, a, b); }
static CUresult gf_evtime(void *f, void *e, unsigned long long *ns) { return ((fn_evtime)f)(e, ns); }
static CUresult gf_capture(void *set, void *ctx, void *f, void *s, int mode) { CUR(set, ctx); return ((fn_capture)f)(s, mode); }
static CUresult gf_instantiate(void *set, void *ctx, void *f, void **e, void *g) { CUR(set, ctx); return ((fn_instantiate)f)(e, g, 0); }
static CUresult gf_waitev(void *set, void *ctx, void *f, void *s, void *e) { CUR(set, ctx); return ((fn_waitev)f)(s, e, 0); }
static const char *gf_errname(void *f, CUresult r) { const char *s = 0; if (f) ((fn_name)f)(r, &s); return s; }
static const char *gf_lasterr(void *f) { return f ? ((fn_lasterr)f)() : 0; }
static CUresult gf_version(void *f, int *v) { return ((fn_pi)f)(v); }
static CUresult gf_devname(void *f, char *buf, int n, int d) { return ((fn_devname)f)(buf, n, d); }
static CUresult gf_busid(void *f, char *buf, int n, int d) { return ((fn_busid)f)(buf, n, d); }
static CUresult gf_allochost(void *set, void *ctx, void *f, void **p, size_t n) { CUR(set, ctx); return ((fn_allochost)f)(p, n); }
static CUresult gf_siminfo(void *f, void *ctx, gf_siminfo_t *info) { info->size = sizeof *info; return ((fn_siminfo)f)(ctx, info); }
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// Handles. They are the library's own pointers and values.
type (
	Device      C.int
	Context     unsafe.Pointer
	Module      unsafe.Pointer
	Function    unsafe.Pointer
	Stream      unsafe.Pointer
	Event       unsafe.Pointer
	Graph       unsafe.Pointer
	GraphExec   unsafe.Pointer
	DevicePtr   uint64
	HostPtr     uintptr
	Result      int
	CaptureMode int
)

// Context scheduling flags (CU_CTX_SCHED_*).
const (
	SchedAuto         = 0x00
	SchedSpin         = 0x01
	SchedYield        = 0x02
	SchedBlockingSync = 0x04
)

// Event flags (CU_EVENT_*).
const (
	EventDefault       = 0x0
	EventBlockingSync  = 0x1
	EventDisableTiming = 0x2
)

// Result codes the callers test for.
const (
	Success          Result = 0
	ErrorNotReady    Result = 600
	ErrorNoDevice    Result = 100
	ErrorInvalidCtx  Result = 201
	ErrorNotInit     Result = 3
	ErrorUnavailable Result = 46
)

// CaptureRelaxed is CU_STREAM_CAPTURE_MODE_RELAXED.
const CaptureRelaxed CaptureMode = 2

// Error is a failed call: the call, CUDA's result code and name, and, from
// the simulated driver, why in words.
type Error struct {
	Call   string
	Code   Result
	Name   string
	Detail string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, int(e.Code))
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Lib is an opened driver library.
type Lib struct {
	Path string
	h    unsafe.Pointer
	f    map[string]unsafe.Pointer
}

// required are the calls every driver exports; the rest (gpufeedSim*) only
// the simulator does.
var required = []string{
	"cuInit", "cuDeviceGet", "cuDeviceGetCount", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease_v2",
	"cuDevicePrimaryCtxSetFlags_v2", "cuCtxCreate_v2", "cuCtxDestroy_v2", "cuCtxSetCurrent", "cuCtxPopCurrent_v2",
	"cuCtxSynchronize", "cuModuleLoadData", "cuModuleGetFunction", "cuStreamCreate", "cuStreamDestroy_v2",
	"cuStreamSynchronize", "cuStreamQuery", "cuStreamWaitEvent", "cuLaunchKernel", "cuMemAlloc_v2", "cuMemFree_v2",
	"cuMemHostAlloc", "cuMemFreeHost", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2", "cuMemcpyHtoDAsync_v2",
	"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuEventCreate", "cuEventRecord", "cuEventSynchronize",
	"cuEventQuery", "cuEventElapsedTime", "cuEventDestroy_v2", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
	"cuGraphInstantiateWithFlags", "cuGraphLaunch", "cuGraphExecDestroy", "cuGraphDestroy", "cuGetErrorName",
	"cuDriverGetVersion", "cuDeviceGetName", "cuDeviceGetPCIBusId", "cuMemAllocHost_v2",
}

var optional = []string{"gpufeedSimDeviceGet", "gpufeedSimLastError", "gpufeedSimCtxGetInfo", "gpufeedSimEventTime"}

var (
	openMu sync.Mutex
	opened = map[string]*Lib{}
)

// Open loads the driver library at path (once per process: dlopen returns
// the same library) and resolves its calls.
func Open(path string) (*Lib, error) {
	openMu.Lock()
	defer openMu.Unlock()
	if l := opened[path]; l != nil {
		return l, nil
	}
	cp := C.CString(path)
	defer C.free(unsafe.Pointer(cp))
	var cerr *C.char
	h := C.gf_open(cp, &cerr)
	if h == nil {
		msg := C.GoString(cerr)
		C.free(unsafe.Pointer(cerr))
		return nil, fmt.Errorf("loading the CUDA driver library %s: %s", path, msg)
	}
	l := &Lib{Path: path, h: h, f: map[string]unsafe.Pointer{}}
	for _, name := range append(append([]string{}, required...), optional...) {
		cn := C.CString(name)
		p := C.gf_sym(h, cn)
		C.free(unsafe.Pointer(cn))
		if p == nil {
			for _, o := range optional {
				if o == name {
					goto next
				}
			}
			return nil, fmt.Errorf("the CUDA driver library %s does not export %s", path, name)
		}
		l.f[name] = p
	next:
	}
	opened[path] = l
	return l, nil
}

// Simulated says whether the library is gpufeed's simulated driver.
func (l *Lib) Simulated() bool { return l.f["gpufeedSimDeviceGet"] != nil }

// do makes one driver call and reads why it failed on the same OS thread:
// the simulated driver keeps the reason per thread (gpufeedSimLastError),
// and a goroutine may move to another thread between two cgo calls.
func (l *Lib) do(call string, f func() C.CUresult) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return l.check(call, f())
}

func (l *Lib) check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	e := &Error{Call: call, Code: Result(r)}
	if s := C.gf_errname(l.f["cuGetErrorName"], r); s != nil {
		e.Name = C.GoString(s)
	} else {
		e.Name = "CUDA error"
	}
	if s := C.gf_lasterr(l.f["gpufeedSimLastError"]); s != nil {
		e.Detail = C.GoString(s)
	}
	return e
}

// IsCode says whether err is a driver error with code c.
func IsCode(err error, c Result) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == c
}

// Init is cuInit(0).
func (l *Lib) Init() error {
	return l.do("cuInit", func() C.CUresult { return C.gf_init(l.f["cuInit"]) })
}

// DeviceCount is cuDeviceGetCount.
func (l *Lib) DeviceCount() (int, error) {
	var n C.int
	err := l.do("cuDeviceGetCount", func() C.CUresult { return C.gf_count(l.f["cuDeviceGetCount"], &n) })
	return int(n), err
}

// DeviceGet is cuDeviceGet.
func (l *Lib) DeviceGet(ordinal int) (Device, error) {
	var d C.int
	err := l.do("cuDeviceGet", func() C.CUresult { return C.gf_devget(l.f["cuDeviceGet"], &d, C.int(ordinal)) })
	return Device(d), err
}

// DriverVersion is cuDriverGetVersion: 12040 is CUDA 12.4.
func (l *Lib) DriverVersion() (int, error) {
	var v C.int
	err := l.do("cuDriverGetVersion", func() C.CUresult { return C.gf_version(l.f["cuDriverGetVersion"], &v) })
	return int(v), err
}

// DeviceName is cuDeviceGetName.
func (l *Lib) DeviceName(d Device) (string, error) {
	buf := (*C.char)(C.malloc(256))
	defer C.free(unsafe.Pointer(buf))
	err := l.do("cuDeviceGetName", func() C.CUresult { return C.gf_devname(l.f["cuDeviceGetName"], buf, 256, C.int(d)) })
	if err != nil {
		return "", err
	}
	return C.GoString(buf), nil
}

// PCIBusID is cuDeviceGetPCIBusId: the device's PCI address as CUDA
// writes it ("0000:81:00.0"), which names the same device in NVML and in
// sysfs whatever order CUDA numbers the devices in.
func (l *Lib) PCIBusID(d Device) (string, error) {
	buf := (*C.char)(C.malloc(64))
	defer C.free(unsafe.Pointer(buf))
	err := l.do("cuDeviceGetPCIBusId", func() C.CUresult { return C.gf_busid(l.f["cuDeviceGetPCIBusId"], buf, 64, C.int(d)) })
	if err != nil {
		return "", err
	}
	return C.GoString(buf), nil
}

// SimDeviceGet names device ordinal of the simulated device at socket
// (gpufeedSimDeviceGet; the simulated driver only).
func (l *Lib) SimDeviceGet(socket string, ordinal int) (Device, error) {
	f := l.f["gpufeedSimDeviceGet"]
	if f == nil {
		return 0, fmt.Errorf("%s is not gpufeed's simulated driver: it cannot address a simulated device", l.Path)
	}
	cs := C.CString(socket)
	defer C.free(unsafe.Pointer(cs))
	var d C.int
	err := l.do("gpufeedSimDeviceGet", func() C.CUresult { return C.gf_simdevget(f, &d, cs, C.int(ordinal)) })
	return Device(d), err
}

// PrimaryCtxSetFlags is cuDevicePrimaryCtxSetFlags_v2.
func (l *Lib) PrimaryCtxSetFlags(d Device, flags uint32) error {
	return l.do("cuDevicePrimaryCtxSetFlags", func() C.CUresult { return C.gf_devu(l.f["cuDevicePrimaryCtxSetFlags_v2"], C.int(d), C.uint(flags)) })
}

// PrimaryCtxRetain is cuDevicePrimaryCtxRetain.
func (l *Lib) PrimaryCtxRetain(d Device) (Context, error) {
	var c unsafe.Pointer
	err := l.do("cuDevicePrimaryCtxRetain", func() C.CUresult { return C.gf_retain(l.f["cuDevicePrimaryCtxRetain"], &c, C.int(d)) })
	return Context(c), err
}

// PrimaryCtxRelease is cuDevicePrimaryCtxRelease_v2.
func (l *Lib) PrimaryCtxRelease(d Device) error {
	return l.do("cuDevicePrimaryCtxRelease", func() C.CUresult { return C.gf_dev(l.f["cuDevicePrimaryCtxRelease_v2"], C.int(d)) })
}

// CtxCreate is cuCtxCreate_v2 (the new context is not left current).
func (l *Lib) CtxCreate(flags uint32, d Device) (Context, error) {
	var c unsafe.Pointer
	err := l.do("cuCtxCreate", func() C.CUresult {
		return C.gf_ctxcreate(l.f["cuCtxCreate_v2"], l.f["cuCtxPopCurrent_v2"], &c, C.uint(flags), C.int(d))
	})
	return Context(c), err
}

// CtxDestroy is cuCtxDestroy_v2.
func (l *Lib) CtxDestroy(c Context) error {
	return l.do("cuCtxDestroy", func() C.CUresult { return C.gf_p(l.f["cuCtxDestroy_v2"], unsafe.Pointer(c)) })
}

// CtxSynchronize is cuCtxSynchronize on c.
func (l *Lib) CtxSynchronize(c Context) error {
	return l.do("cuCtxSynchronize", func() C.CUresult {
		return C.gf_ctx_v(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuCtxSynchronize"])
	})
}

// ModuleLoadData is cuModuleLoadData of PTX text in c.
func (l *Lib) ModuleLoadData(c Context, ptx string) (Module, error) {
	cs := C.CString(ptx)
	defer C.free(unsafe.Pointer(cs))
	var m unsafe.Pointer
	err := l.do("cuModuleLoadData", func() C.CUresult {
		return C.gf_modload(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuModuleLoadData"], &m, cs)
	})
	return Module(m), err
}

// ModuleGetFunction is cuModuleGetFunction.
func (l *Lib) ModuleGetFunction(m Module, name string) (Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f unsafe.Pointer
	err := l.do("cuModuleGetFunction", func() C.CUresult { return C.gf_getfunc(l.f["cuModuleGetFunction"], &f, unsafe.Pointer(m), cs) })
	return Function(f), err
}

// StreamCreate is cuStreamCreate in c.
func (l *Lib) StreamCreate(c Context, flags uint32) (Stream, error) {
	var s unsafe.Pointer
	err := l.do("cuStreamCreate", func() C.CUresult {
		return C.gf_ctx_ppu(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuStreamCreate"], &s, C.uint(flags))
	})
	return Stream(s), err
}

// StreamDestroy is cuStreamDestroy_v2.
func (l *Lib) StreamDestroy(c Context, s Stream) error {
	return l.do("cuStreamDestroy", func() C.CUresult {
		return C.gf_ctx_p(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuStreamDestroy_v2"], unsafe.Pointer(s))
	})
}

// StreamSynchronize is cuStreamSynchronize (nil: the default stream).
func (l *Lib) StreamSynchronize(c Context, s Stream) error {
	return l.do("cuStreamSynchronize", func() C.CUresult {
		return C.gf_ctx_p(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuStreamSynchronize"], unsafe.Pointer(s))
	})
}

// StreamQuery is cuStreamQuery: true when the stream's work is done.
func (l *Lib) StreamQuery(c Context, s Stream) (bool, error) {
	r := C.gf_ctx_p(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuStreamQuery"], unsafe.Pointer(s))
	if Result(r) == ErrorNotReady {
		return false, nil
	}
	return true, l.do("cuStreamQuery", func() C.CUresult { return r })
}

// StreamWaitEvent is cuStreamWaitEvent.
func (l *Lib) StreamWaitEvent(c Context, s Stream, e Event) error {
	return l.do("cuStreamWaitEvent", func() C.CUresult {
		return C.gf_waitev(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuStreamWaitEvent"], unsafe.Pointer(s), unsafe.Pointer(e))
	})
}

// Launch launches f on one thread of one block with one 64-bit parameter
// (the simulator's kernel: its duration in nanoseconds).
func (l *Lib) Launch(c Context, f Function, s Stream, arg uint64) error {
	return l.do("cuLaunchKernel", func() C.CUresult {
		return C.gf_launch1(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuLaunchKernel"], unsafe.Pointer(f), unsafe.Pointer(s), C.uint64_t(arg))
	})
}

// MemAlloc is cuMemAlloc_v2.
func (l *Lib) MemAlloc(c Context, n uint64) (DevicePtr, error) {
	var p C.CUdeviceptr
	err := l.do("cuMemAlloc", func() C.CUresult {
		return C.gf_memalloc(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuMemAlloc_v2"], &p, C.size_t(n))
	})
	return DevicePtr(p), err
}

// MemFree is cuMemFree_v2.
func (l *Lib) MemFree(c Context, p DevicePtr) error {
	return l.do("cuMemFree", func() C.CUresult {
		return C.gf_memfree(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuMemFree_v2"], C.CUdeviceptr(p))
	})
}

// MemHostAlloc is cuMemHostAlloc: page-locked host memory.
func (l *Lib) MemHostAlloc(c Context, n uint64) (HostPtr, error) {
	var p unsafe.Pointer
	err := l.do("cuMemHostAlloc", func() C.CUresult {
		return C.gf_hostalloc(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuMemHostAlloc"], &p, C.size_t(n))
	})
	return HostPtr(uintptr(p)), err
}

// MemAllocHost is cuMemAllocHost_v2: page-locked host memory, as
// cudaMallocHost (and PyTorch's pin_memory) allocate it.
func (l *Lib) MemAllocHost(c Context, n uint64) (HostPtr, error) {
	var p unsafe.Pointer
	err := l.do("cuMemAllocHost", func() C.CUresult {
		return C.gf_allochost(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuMemAllocHost_v2"], &p, C.size_t(n))
	})
	return HostPtr(uintptr(p)), err
}

// MemFreeHost is cuMemFreeHost.
func (l *Lib) MemFreeHost(p HostPtr) error {
	return l.do("cuMemFreeHost", func() C.CUresult { return C.gf_freehost(l.f["cuMemFreeHost"], C.uintptr_t(p)) })
}

// MemcpyHtoD copies n bytes from host memory at h (which must not be Go
// memory) to d: on stream s when async, else synchronously.
func (l *Lib) MemcpyHtoD(c Context, d DevicePtr, h HostPtr, n uint64, s Stream, async bool) error {
	if !async {
		return l.do("cuMemcpyHtoD", func() C.CUresult {
			return C.gf_htod_sync(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuMemcpyHtoD_v2"], C.CUdeviceptr(d), C.uintptr_t(h), C.size_t(n))
		})
	}
	return l.do("cuMemcpyHtoDAsync", func() C.CUresult {
		return C.gf_htod(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuMemcpyHtoDAsync_v2"], C.CUdeviceptr(d), C.uintptr_t(h), C.size_t(n), unsafe.Pointer(s))
	})
}

// MemcpyDtoH copies n bytes from d to host memory at h.
func (l *Lib) MemcpyDtoH(c Context, h HostPtr, d DevicePtr, n uint64, s Stream, async bool) error {
	if !async {
		return l.do("cuMemcpyDtoH", func() C.CUresult {
			return C.gf_dtoh_sync(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuMemcpyDtoH_v2"], C.uintptr_t(h), C.CUdeviceptr(d), C.size_t(n))
		})
	}
	return l.do("cuMemcpyDtoHAsync", func() C.CUresult {
		return C.gf_dtoh(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuMemcpyDtoHAsync_v2"], C.uintptr_t(h), C.CUdeviceptr(d), C.size_t(n), unsafe.Pointer(s))
	})
}

// MemcpyDtoD copies n bytes between device buffers on stream s.
func (l *Lib) MemcpyDtoD(c Context, dst, src DevicePtr, n uint64, s Stream) error {
	return l.do("cuMemcpyDtoDAsync", func() C.CUresult {
		return C.gf_dtod(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuMemcpyDtoDAsync_v2"], C.CUdeviceptr(dst), C.CUdeviceptr(src), C.size_t(n), unsafe.Pointer(s))
	})
}

// EventCreate is cuEventCreate.
func (l *Lib) EventCreate(c Context, flags uint32) (Event, error) {
	var e unsafe.Pointer
	err := l.do("cuEventCreate", func() C.CUresult {
		return C.gf_ctx_ppu(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuEventCreate"], &e, C.uint(flags))
	})
	return Event(e), err
}

// EventRecord is cuEventRecord.
func (l *Lib) EventRecord(c Context, e Event, s Stream) error {
	return l.do("cuEventRecord", func() C.CUresult {
		return C.gf_ctx_pp2(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuEventRecord"], unsafe.Pointer(e), unsafe.Pointer(s))
	})
}

// EventSynchronize is cuEventSynchronize.
func (l *Lib) EventSynchronize(c Context, e Event) error {
	return l.do("cuEventSynchronize", func() C.CUresult {
		return C.gf_ctx_p(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuEventSynchronize"], unsafe.Pointer(e))
	})
}

// EventQuery is cuEventQuery: true when the event has completed.
func (l *Lib) EventQuery(c Context, e Event) (bool, error) {
	r := C.gf_ctx_p(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuEventQuery"], unsafe.Pointer(e))
	if Result(r) == ErrorNotReady {
		return false, nil
	}
	return true, l.do("cuEventQuery", func() C.CUresult { return r })
}

// EventElapsed is cuEventElapsedTime, in milliseconds.
func (l *Lib) EventElapsed(a, b Event) (float32, error) {
	var ms C.float
	err := l.do("cuEventElapsedTime", func() C.CUresult {
		return C.gf_elapsed(l.f["cuEventElapsedTime"], &ms, unsafe.Pointer(a), unsafe.Pointer(b))
	})
	return float32(ms), err
}

// SimEventTime is the device time of a recorded event, in CLOCK_MONOTONIC
// nanoseconds of the simulated device (gpufeedSimEventTime).
func (l *Lib) SimEventTime(e Event) (int64, error) {
	f := l.f["gpufeedSimEventTime"]
	if f == nil {
		return 0, fmt.Errorf("%s is not gpufeed's simulated driver", l.Path)
	}
	var ns C.ulonglong
	err := l.do("gpufeedSimEventTime", func() C.CUresult { return C.gf_evtime(f, unsafe.Pointer(e), &ns) })
	return int64(ns), err
}

// EventDestroy is cuEventDestroy_v2.
func (l *Lib) EventDestroy(e Event) error {
	return l.do("cuEventDestroy", func() C.CUresult { return C.gf_p(l.f["cuEventDestroy_v2"], unsafe.Pointer(e)) })
}

// BeginCapture is cuStreamBeginCapture_v2.
func (l *Lib) BeginCapture(c Context, s Stream, mode CaptureMode) error {
	return l.do("cuStreamBeginCapture", func() C.CUresult {
		return C.gf_capture(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuStreamBeginCapture_v2"], unsafe.Pointer(s), C.int(mode))
	})
}

// EndCapture is cuStreamEndCapture.
func (l *Lib) EndCapture(c Context, s Stream) (Graph, error) {
	var g unsafe.Pointer
	err := l.do("cuStreamEndCapture", func() C.CUresult {
		return C.gf_ctx_pp2(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuStreamEndCapture"], unsafe.Pointer(s), unsafe.Pointer(&g))
	})
	return Graph(g), err
}

// GraphInstantiate is cuGraphInstantiateWithFlags(…, 0).
func (l *Lib) GraphInstantiate(c Context, g Graph) (GraphExec, error) {
	var e unsafe.Pointer
	err := l.do("cuGraphInstantiate", func() C.CUresult {
		return C.gf_instantiate(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuGraphInstantiateWithFlags"], &e, unsafe.Pointer(g))
	})
	return GraphExec(e), err
}

// GraphLaunch is cuGraphLaunch.
func (l *Lib) GraphLaunch(c Context, e GraphExec, s Stream) error {
	return l.do("cuGraphLaunch", func() C.CUresult {
		return C.gf_ctx_pp2(l.f["cuCtxSetCurrent"], unsafe.Pointer(c), l.f["cuGraphLaunch"], unsafe.Pointer(e), unsafe.Pointer(s))
	})
}

// GraphDestroy is cuGraphDestroy; GraphExecDestroy is cuGraphExecDestroy.
func (l *Lib) GraphDestroy(g Graph) error {
	return l.do("cuGraphDestroy", func() C.CUresult { return C.gf_p(l.f["cuGraphDestroy"], unsafe.Pointer(g)) })
}

// GraphExecDestroy is cuGraphExecDestroy.
func (l *Lib) GraphExecDestroy(e GraphExec) error {
	return l.do("cuGraphExecDestroy", func() C.CUresult { return C.gf_p(l.f["cuGraphExecDestroy"], unsafe.Pointer(e)) })
}

// SimInfo describes a simulated context (gpufeedSimCtxGetInfo).
type SimInfo struct {
	PID, Ordinal, Devices int
	// SchedFlags are the context's CU_CTX_SCHED_* flags; SchedResolved is
	// what a wait does now (SchedSpin, SchedYield or SchedBlockingSync).
	SchedFlags, SchedResolved uint32
	MaxPending                int
	LaunchCostNS              uint64
	Bandwidth                 [3]float64 // pinned bytes/s: h2d, d2h, d2d
	PageableFactor            float64
}

// SimCtxInfo is gpufeedSimCtxGetInfo.
func (l *Lib) SimCtxInfo(c Context) (SimInfo, error) {
	f := l.f["gpufeedSimCtxGetInfo"]
	if f == nil {
		return SimInfo{}, fmt.Errorf("%s is not gpufeed's simulated driver", l.Path)
	}
	var in C.gf_siminfo_t
	if err := l.do("gpufeedSimCtxGetInfo", func() C.CUresult { return C.gf_siminfo(f, unsafe.Pointer(c), &in) }); err != nil {
		return SimInfo{}, err
	}
	return SimInfo{
		PID: int(in.pid), Ordinal: int(in.ordinal), Devices: int(in.devices),
		SchedFlags: uint32(in.schedFlags), SchedResolved: uint32(in.schedResolved), MaxPending: int(in.maxPending),
		LaunchCostNS: uint64(in.launchCostNs), Bandwidth: [3]float64{float64(in.bandwidth[0]), float64(in.bandwidth[1]), float64(in.bandwidth[2])},
		PageableFactor: float64(in.pageableFactor),
	}, nil
}
