"""Client of gpufeed's simulated GPU (``gpufeed simdev``), standard library only.

The simulated device is a queueing model of CUDA streams: kernels have a
duration, copies move bytes over a PCIe link, synchronisation waits for a
stream's last end time. This module drives it through gpufeed's simulated
CUDA driver (libgpufeed-simcuda.so) with ctypes, calling the CUDA driver
API as a CUDA program does: a launch costs the thread a few microseconds of
user CPU and makes no system call; a synchronisation waits as CUDA's
scheduling flags say (``sync``: spin, yield, block, or auto as CUDA's
default).

Usage, with ``sys.path`` pointing at the repository's ``python/`` directory::

    import gpufeed_simdev
    dev = gpufeed_simdev.connect()           # socket path from GPUFEED_SIMDEV
    dev.launch(50)                           # a 50 us kernel on stream 0
    dev.memcpy(64 << 20, kind="h2d", pinned=False)   # stages, blocks until copied
    dev.graph_launch([20, 20, 40])           # a CUDA graph of three kernels, one launch
    dev.synchronize()                        # every stream of this process

A ``Device`` is the process's primary context on the device, shared by its
threads, as CUDA's is. After ``fork`` the child uses a context of its own.
docs/SIMDEV.md in the gpufeed repository documents the model and the API.
"""

import ctypes
import json
import os
import socket
import struct
import threading
import time
import weakref

__all__ = ["connect", "Device", "SimdevError", "ENV_VAR", "ENV_SYNC", "ENV_LIB", "SYNC_MODES"]

ENV_VAR = "GPUFEED_SIMDEV"
ENV_SYNC = "GPUFEED_SIMDEV_SYNC"
ENV_LIB = "GPUFEED_SIMDEV_LIB"
PROTOCOL_VERSION = 2

# CU_CTX_SCHED_* (CUDA driver API).
SYNC_MODES = {"auto": 0, "spin": 1, "yield": 2, "block": 4}
_SCHED_NAMES = {1: "spin", 2: "yield", 4: "block"}

_KINDS = ("h2d", "d2h", "d2d")

# The simulator's kernel: its first parameter is its duration in
# nanoseconds (on a real GPU it spins on %globaltimer that long). The same
# text as gpufeed's internal/sim/simcuda/csrc/gpufeed_sim_kernel.ptx.
KERNEL_PTX = b"""//
// gpufeed's simulated kernel: its first parameter is how long it runs, in
// nanoseconds. The simulated driver reads that parameter as the kernel's
// duration; on a real GPU this code spins on the global nanosecond timer for
// as long, so a program that launches it measures the same thing on both.
//
.version 6.0
.target sm_50
.address_size 64

.visible .entry gpufeed_sim_kernel(
\t.param .u64 gpufeed_sim_kernel_param_0
)
{
\t.reg .pred \t%p<2>;
\t.reg .b64 \t%rd<5>;

\tld.param.u64 \t%rd1, [gpufeed_sim_kernel_param_0];
\tmov.u64 \t%rd2, %globaltimer;
\tadd.s64 \t%rd3, %rd2, %rd1;
$L_spin:
\tmov.u64 \t%rd4, %globaltimer;
\tsetp.lt.u64 \t%p1, %rd4, %rd3;
\t@%p1 bra \t$L_spin;
\tret;
}
"""
KERNEL_NAME = b"gpufeed_sim_kernel"

_NOT_READY = 600


class SimdevError(RuntimeError):
    """The simulated device refused a request or went away."""


def connect(path=None, device=0, sync=None):
    """Connect to the simulated device at ``path`` (default: $GPUFEED_SIMDEV).

    ``sync`` is how waits for the device behave: "auto" (CUDA's default),
    "spin", "yield" or "block"; default: $GPUFEED_SIMDEV_SYNC, else "auto".
    """
    if path is None:
        path = os.environ.get(ENV_VAR, "")
    if not path:
        raise SimdevError(
            ENV_VAR + " is not set: start a simulated device with "
            "`gpufeed simdev --socket PATH` and export " + ENV_VAR + "=PATH"
        )
    if sync is None:
        sync = os.environ.get(ENV_SYNC, "") or "auto"
    if sync not in SYNC_MODES:
        raise SimdevError("sync mode %r: want one of auto, spin, yield, block (%s)" % (sync, ENV_SYNC))
    return Device(path, device, sync)


def _query(path):
    """Ask the server at path what it is: the driver library it built."""
    req = struct.pack("<BBBBIqQQ", 1, 0, 3, 0, 0, time.monotonic_ns(), PROTOCOL_VERSION, 1)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.settimeout(120)  # the server may be compiling the library
        s.connect(path)
        s.sendall(req)
        hdr = _recv(s, 32)
        _op, status, _, plen, _t, _v, _seq = struct.unpack("<BBHIqQQ", hdr)
        payload = _recv(s, plen) if plen else b""
    except OSError as e:
        raise SimdevError("simulated device at %s: %s" % (path, e)) from None
    finally:
        s.close()
    if status:
        raise SimdevError("simulated device at %s: %s" % (path, payload.decode("utf-8", "replace")))
    try:
        return json.loads(payload or b"{}")
    except ValueError:
        raise SimdevError("simulated device at %s: its answer is not understood" % path) from None


def _recv(s, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise OSError("the connection closed")
        buf += chunk
    return bytes(buf)


_lib = None
_lib_lock = threading.Lock()


def _library(path):
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        so = os.environ.get(ENV_LIB, "")
        if not so:
            q = _query(path)
            so = q.get("library", "")
            if not so:
                raise SimdevError(
                    "simulated device at %s has no driver library: %s" % (path, q.get("library_error", "no reason given"))
                )
        try:
            lib = ctypes.CDLL(so)  # calls release the GIL, as CUDA's Python bindings do
        except OSError as e:
            raise SimdevError("loading the simulated driver %s: %s" % (so, e)) from None
        vp, u, i, sz = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_size_t
        sigs = {
            "gpufeedSimDeviceGet": [ctypes.POINTER(i), ctypes.c_char_p, i],
            "gpufeedSimLastError": [],
            "gpufeedSimCtxGetInfo": [vp, vp],
            "cuDevicePrimaryCtxSetFlags_v2": [i, u],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), i],
            "cuDevicePrimaryCtxRelease_v2": [i],
            "cuCtxSetCurrent": [vp],
            "cuCtxSynchronize": [],
            "cuModuleLoadData": [ctypes.POINTER(vp), ctypes.c_char_p],
            "cuModuleGetFunction": [ctypes.POINTER(vp), vp, ctypes.c_char_p],
            "cuStreamCreate": [ctypes.POINTER(vp), u],
            "cuStreamSynchronize": [vp],
            "cuStreamQuery": [vp],
            "cuLaunchKernel": [vp, u, u, u, u, u, u, u, vp, vp, vp],
            "cuMemAlloc_v2": [ctypes.POINTER(ctypes.c_uint64), sz],
            "cuMemFree_v2": [ctypes.c_uint64],
            "cuMemHostAlloc": [ctypes.POINTER(vp), sz, u],
            "cuMemFreeHost": [vp],
            "cuMemcpyHtoDAsync_v2": [ctypes.c_uint64, vp, sz, vp],
            "cuMemcpyDtoHAsync_v2": [vp, ctypes.c_uint64, sz, vp],
            "cuMemcpyDtoDAsync_v2": [ctypes.c_uint64, ctypes.c_uint64, sz, vp],
            "cuStreamBeginCapture_v2": [vp, i],
            "cuStreamEndCapture": [vp, ctypes.POINTER(vp)],
            "cuGraphInstantiateWithFlags": [ctypes.POINTER(vp), vp, ctypes.c_ulonglong],
            "cuGraphLaunch": [vp, vp],
            "cuGraphDestroy": [vp],
        }
        for name, args in sigs.items():
            f = getattr(lib, name)
            f.argtypes = args
            f.restype = ctypes.c_char_p if name == "gpufeedSimLastError" else ctypes.c_int
        _lib = lib
        return lib


class _Info(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_uint),
        ("pid", ctypes.c_int),
        ("ordinal", ctypes.c_int),
        ("devices", ctypes.c_int),
        ("schedFlags", ctypes.c_uint),
        ("schedResolved", ctypes.c_uint),
        ("maxPending", ctypes.c_uint),
        ("reserved", ctypes.c_uint),
        ("launchCostNs", ctypes.c_ulonglong),
        ("bandwidth", ctypes.c_double * 3),
        ("pageableFactor", ctypes.c_double),
    ]


_devices = weakref.WeakSet()


def _after_fork():
    for d in list(_devices):
        d._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class Device:
    """A simulated GPU: this process's primary context on it. Safe to share between threads."""

    def __init__(self, path, device=0, sync="auto"):
        self.path = path
        self.device = device
        self.sync_mode = sync
        self._lock = threading.Lock()
        self._local = threading.local()
        self._lib = _library(path)
        self._open()
        _devices.add(self)

    def _check(self, r, call):
        if r:
            why = self._lib.gpufeedSimLastError() or b""
            raise SimdevError(
                "simulated device at %s: %s failed (CUDA error %d): %s" % (self.path, call, r, why.decode("utf-8", "replace"))
            )

    def _open(self):
        lib = self._lib
        dev = ctypes.c_int()
        self._check(lib.gpufeedSimDeviceGet(ctypes.byref(dev), self.path.encode(), int(self.device)), "gpufeedSimDeviceGet")
        self._dev = dev.value
        self._check(lib.cuDevicePrimaryCtxSetFlags_v2(self._dev, SYNC_MODES[self.sync_mode]), "cuDevicePrimaryCtxSetFlags")
        ctx = ctypes.c_void_p()
        self._check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), self._dev), "cuDevicePrimaryCtxRetain")
        self._ctx = ctx
        self._gen = getattr(self, "_gen", 0) + 1
        self._local = threading.local()
        self._current()
        mod = ctypes.c_void_p()
        self._check(lib.cuModuleLoadData(ctypes.byref(mod), KERNEL_PTX), "cuModuleLoadData")
        fn = ctypes.c_void_p()
        self._check(lib.cuModuleGetFunction(ctypes.byref(fn), mod, KERNEL_NAME), "cuModuleGetFunction")
        self._fn = fn
        info = _Info()
        info.size = ctypes.sizeof(_Info)
        self._check(lib.gpufeedSimCtxGetInfo(ctx, ctypes.byref(info)), "gpufeedSimCtxGetInfo")
        self._info = info
        self._streams = {0: None}
        self._host = {}  # pinned: (pointer, size); pageable: buffer
        self._dbuf = (0, 0)
        self._graphs = {}
        self._capture_stream = None
        self._closed = False

    def _forked(self):
        # The parent's context is not the child's: the child opens its own
        # on first use (the driver library has dropped the parent's).
        self._ctx = None

    def _current(self):
        """Make the context current on this thread; returns the thread's launch arguments."""
        loc = self._local
        if getattr(loc, "gen", 0) != self._gen:
            self._check(self._lib.cuCtxSetCurrent(self._ctx), "cuCtxSetCurrent")
            loc.gen = self._gen
            loc.dur = ctypes.c_uint64(0)
            loc.params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(loc.dur), ctypes.c_void_p))
        return loc

    def _ready(self):
        if self._ctx is None:
            with self._lock:
                if self._ctx is None:
                    self._open()
        if self._closed:
            raise SimdevError("simulated device at %s: the Device is closed" % self.path)
        return self._current()

    def _stream(self, stream):
        s = int(stream)
        h = self._streams.get(s, 0)
        if h != 0:
            return h
        if s < 0 or s > 0xFFFFFFFF:
            raise ValueError("stream must be in [0, 2**32): %r" % (stream,))
        if s == 0:
            return None
        with self._lock:
            h = self._streams.get(s, 0)
            if h == 0:
                p = ctypes.c_void_p()
                self._check(self._lib.cuStreamCreate(ctypes.byref(p), 0), "cuStreamCreate")
                h = self._streams[s] = p
        return h

    def launch(self, duration_us, stream=0):
        """Submit a kernel of ``duration_us`` microseconds to ``stream``.

        Returns after the launch's CPU cost, unless the stream already holds
        1024 pending operations: then it waits until one ends, as
        cuLaunchKernel does.
        """
        loc = self._ready()
        ns = int(round(float(duration_us) * 1000))
        if ns < 0:
            raise ValueError("kernel duration must not be negative: %r us" % (duration_us,))
        loc.dur.value = ns
        r = self._lib.cuLaunchKernel(self._fn, 1, 1, 1, 1, 1, 1, 0, self._stream(stream), loc.params, None)
        if r:
            self._check(r, "cuLaunchKernel")

    def _buffers(self, nbytes, pinned):
        with self._lock:
            size, dptr = self._dbuf[1], self._dbuf[0]
            if size < max(nbytes, 1):
                if dptr:
                    self._lib.cuMemFree_v2(dptr)
                p = ctypes.c_uint64()
                self._check(self._lib.cuMemAlloc_v2(ctypes.byref(p), max(nbytes, 1)), "cuMemAlloc")
                self._dbuf = (p.value, max(nbytes, 1))
            h = self._host.get(pinned)
            if h is None or h[1] < nbytes:
                if pinned:
                    if h is not None:
                        self._lib.cuMemFreeHost(h[0])
                    p = ctypes.c_void_p()
                    self._check(self._lib.cuMemHostAlloc(ctypes.byref(p), max(nbytes, 1), 0), "cuMemHostAlloc")
                    h = (p, max(nbytes, 1))
                else:
                    buf = ctypes.create_string_buffer(max(nbytes, 1))  # pageable memory
                    h = (ctypes.cast(buf, ctypes.c_void_p), max(nbytes, 1), buf)
                self._host[pinned] = h
            return h[0], self._dbuf[0]

    def memcpy(self, nbytes, kind="h2d", pinned=True, stream=0):
        """Copy ``nbytes``: ``kind`` is "h2d", "d2h" or "d2d".

        A pinned copy is asynchronous (cuMemcpyHtoDAsync from page-locked
        memory). A pageable h2d/d2h copy is slower, stages through a bounce
        buffer (CPU work) and returns when it is done.
        """
        if kind not in _KINDS:
            raise ValueError("memcpy kind must be one of h2d, d2h, d2d: %r" % (kind,))
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError("memcpy size must not be negative: %r" % (nbytes,))
        self._ready()
        s = self._stream(stream)
        host, dptr = self._buffers(nbytes, bool(pinned) or kind == "d2d")
        lib = self._lib
        if kind == "h2d":
            self._check(lib.cuMemcpyHtoDAsync_v2(dptr, host, nbytes, s), "cuMemcpyHtoDAsync")
        elif kind == "d2h":
            self._check(lib.cuMemcpyDtoHAsync_v2(host, dptr, nbytes, s), "cuMemcpyDtoHAsync")
        else:
            self._check(lib.cuMemcpyDtoDAsync_v2(dptr, dptr, nbytes, s), "cuMemcpyDtoDAsync")

    def graph_launch(self, kernels_us, stream=0):
        """Launch a CUDA graph of kernels of these durations (us), back to back.

        The graph is captured on first use (stream capture) and kept; each
        call is one cuGraphLaunch: one launch's CPU cost for all its kernels.
        """
        loc = self._ready()
        key = tuple(int(round(float(k) * 1000)) for k in kernels_us)
        if any(k < 0 for k in key):
            raise ValueError("kernel durations must not be negative: %r" % (kernels_us,))
        with self._lock:
            exe = self._graphs.get(key)
            if exe is None:
                exe = self._graphs[key] = self._capture(key, loc)
        self._check(self._lib.cuGraphLaunch(exe, self._stream(stream)), "cuGraphLaunch")

    def _capture(self, key, loc):
        lib = self._lib
        if self._capture_stream is None:
            p = ctypes.c_void_p()
            self._check(lib.cuStreamCreate(ctypes.byref(p), 0), "cuStreamCreate")
            self._capture_stream = p
        cs = self._capture_stream
        self._check(lib.cuStreamBeginCapture_v2(cs, 2), "cuStreamBeginCapture")  # relaxed
        graph = ctypes.c_void_p()
        try:
            for ns in key:
                loc.dur.value = ns
                self._check(lib.cuLaunchKernel(self._fn, 1, 1, 1, 1, 1, 1, 0, cs, loc.params, None), "cuLaunchKernel")
        finally:
            r = lib.cuStreamEndCapture(cs, ctypes.byref(graph))
        self._check(r, "cuStreamEndCapture")
        exe = ctypes.c_void_p()
        r = lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, 0)
        lib.cuGraphDestroy(graph)
        self._check(r, "cuGraphInstantiate")
        return exe

    def synchronize(self, stream=None):
        """Block until ``stream``'s work (None: every stream of this process) has ended."""
        self._ready()
        if stream is None:
            self._check(self._lib.cuCtxSynchronize(), "cuCtxSynchronize")
        else:
            self._check(self._lib.cuStreamSynchronize(self._stream(stream)), "cuStreamSynchronize")

    def query(self, stream=0):
        """True when ``stream``'s work has ended (cuStreamQuery): never waits."""
        self._ready()
        r = self._lib.cuStreamQuery(self._stream(stream))
        if r == _NOT_READY:
            return False
        self._check(r, "cuStreamQuery")
        return True

    @property
    def pid(self):
        """This process as the device identifies it."""
        self._ready()
        return int(self._info.pid)

    @property
    def sync(self):
        """How waits for the device behave now: "spin", "yield" or "block"."""
        self._ready()
        info = _Info()
        info.size = ctypes.sizeof(_Info)
        self._check(self._lib.gpufeedSimCtxGetInfo(self._ctx, ctypes.byref(info)), "gpufeedSimCtxGetInfo")
        return _SCHED_NAMES.get(info.schedResolved, "spin")

    @property
    def launch_cost_us(self):
        """The user CPU time each launch costs, in microseconds."""
        self._ready()
        return self._info.launchCostNs / 1000.0

    def close(self):
        """Release this process's context (its queued work still runs)."""
        with self._lock:
            if self._closed or self._ctx is None:
                self._closed = True
                return
            self._closed = True
            pinned = self._host.get(True)
            if pinned is not None:
                self._lib.cuMemFreeHost(pinned[0])
            self._host = {}
            self._lib.cuDevicePrimaryCtxRelease_v2(self._dev)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
