"""Client of gpufeed's simulated GPU (``gpufeed simdev``), standard library only.

The simulated device is a queueing model of CUDA streams: kernels have a
duration, copies move bytes over a PCIe link, synchronisation waits for a
stream's last end time. Each call here is one message on a Unix socket (one
system call, as a kernel launch is one driver call); only the calls that block
in CUDA wait for an answer: ``synchronize``, a pageable ``memcpy``, and a
submit into a stream that already holds 1024 pending operations.

Usage, with ``sys.path`` pointing at the repository's ``python/`` directory::

    import gpufeed_simdev
    dev = gpufeed_simdev.connect()           # socket path from GPUFEED_SIMDEV
    dev.launch(50)                           # a 50 us kernel on stream 0
    dev.memcpy(64 << 20, kind="h2d", pinned=False)   # blocks until copied
    dev.synchronize()                        # every stream of this process

Streams belong to the process (as CUDA streams belong to its context): every
thread sees the same stream 0. Each thread gets its own connection, so one
thread blocking in ``synchronize`` does not hold up another's launches. After
``fork`` the child opens its own connection and is a process of its own.
docs/SIMDEV.md in the gpufeed repository documents the model and the protocol.
"""

import collections
import json
import os
import socket
import struct
import threading
import time

__all__ = ["connect", "Device", "SimdevError", "ENV_VAR"]

ENV_VAR = "GPUFEED_SIMDEV"
PROTOCOL_VERSION = 1

# Frames: see docs/SIMDEV.md, "Wire protocol".
_REQUEST = struct.Struct("<BBBBIqQQ")  # op flags kind 0 stream ts arg seq
_REPLY = struct.Struct("<BBHIqQQ")  # op status 0 payload time value seq
_MAX_PAYLOAD = 16 << 20

_OP_HELLO = 1
_OP_LAUNCH = 2
_OP_MEMCPY = 3
_OP_SYNC = 4
_OP_SYNC_DEVICE = 5

_FLAG_REPLY = 1
_FLAG_PINNED = 2

_ROLE_WORKLOAD = 0

_KINDS = {"h2d": 0, "d2h": 1, "d2d": 2}


class SimdevError(RuntimeError):
    """The simulated device refused a request or went away."""


def connect(path=None, device=0):
    """Connect to the simulated device at ``path`` (default: $GPUFEED_SIMDEV)."""
    if path is None:
        path = os.environ.get(ENV_VAR, "")
    if not path:
        raise SimdevError(
            ENV_VAR + " is not set: start a simulated device with "
            "`gpufeed simdev --socket PATH` and export " + ENV_VAR + "=PATH"
        )
    return Device(path, device)


class _Connection:
    """One socket, used by one thread, with that thread's view of the streams."""

    def __init__(self, path, device):
        self.path = path
        self.pid = os.getpid()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
        except OSError as e:
            self.sock.close()
            raise SimdevError("simulated device at %s: %s" % (path, e)) from None
        self.seq = 0
        self.hello = json.loads(self.call(_OP_HELLO, 0, _ROLE_WORKLOAD, device, PROTOCOL_VERSION)[1] or b"{}")
        self.max_pending = int(self.hello.get("max_pending", 1024))
        self.bandwidth = self.hello.get("bandwidth_bytes_per_sec", {})
        self.pageable_factor = float(self.hello.get("pageable_factor", 0.5))
        # stream -> [end times of operations believed pending, last end]
        self.mirror = {}

    def send(self, op, flags, kind, stream, arg, ts=None):
        self.seq += 1
        if ts is None:
            ts = time.monotonic_ns()
        frame = _REQUEST.pack(op, flags, kind, 0, stream, ts, arg, self.seq)
        try:
            self.sock.sendall(frame)
        except OSError as e:
            raise SimdevError("simulated device at %s: %s" % (self.path, self._why(e))) from None
        return self.seq

    def _why(self, err):
        # After a refused request the server answers, then closes: show its reason.
        try:
            self.sock.settimeout(0.2)
            status, payload, _ = self.recv()
            if status:
                return payload.decode("utf-8", "replace")
        except (OSError, SimdevError):
            pass
        return str(err)

    def _read(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise SimdevError("simulated device at %s closed the connection" % self.path)
            buf += chunk
        return bytes(buf)

    def recv(self):
        op, status, _, plen, t, _value, seq = _REPLY.unpack(self._read(_REPLY.size))
        if plen > _MAX_PAYLOAD:
            raise SimdevError("simulated device at %s: oversized reply" % self.path)
        payload = self._read(plen) if plen else b""
        return status, payload, (op, t, seq)

    def wait(self, seq):
        """Read replies until the one for ``seq``; returns (payload, end time)."""
        while True:
            status, payload, (_op, t, rseq) = self.recv()
            if status:
                raise SimdevError(
                    "simulated device at %s: %s" % (self.path, payload.decode("utf-8", "replace"))
                )
            if rseq == seq:
                return t, payload

    def call(self, op, flags, kind, stream, arg):
        seq = self.send(op, flags, kind, stream, arg)
        t, payload = self.wait(seq)
        return t, payload

    def submit(self, op, flags, kind, stream, arg, duration_ns, blocking):
        """Send a kernel or copy; block if the stream is full or the call blocks in CUDA."""
        now = time.monotonic_ns()
        m = self.mirror.get(stream)
        if m is None:
            m = self.mirror[stream] = [collections.deque(), 0]
        ends = m[0]
        while ends and ends[0] <= now:
            ends.popleft()
        full = len(ends) >= self.max_pending
        if full:
            flags |= _FLAG_REPLY
        end = max(now, m[1]) + duration_ns
        m[1] = end
        ends.append(end)
        seq = self.send(op, flags, kind, stream, arg, ts=now)
        if full or blocking:
            t, _ = self.wait(seq)
            # The server's end time is the truth: correct the estimate.
            if m[1] == end:
                m[1] = t
                ends[-1] = t

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Device:
    """A simulated GPU. Safe to share between threads; see the module docstring."""

    def __init__(self, path, device=0):
        self.path = path
        self.device = device
        self._local = threading.local()
        self._lock = threading.Lock()
        self._conns = []
        self._conn()  # fail now, not at the first launch, if nobody listens

    def _conn(self):
        c = getattr(self._local, "conn", None)
        if c is None or c.pid != os.getpid():
            c = _Connection(self.path, self.device)
            self._local.conn = c
            with self._lock:
                self._conns.append(c)
        return c

    def launch(self, duration_us, stream=0):
        """Submit a kernel of ``duration_us`` microseconds to ``stream``.

        Returns at once, unless the stream already holds 1024 pending
        operations: then it blocks until one ends, as cudaLaunchKernel does.
        """
        ns = int(round(float(duration_us) * 1000))
        if ns < 0:
            raise ValueError("kernel duration must not be negative: %r us" % (duration_us,))
        self._conn().submit(_OP_LAUNCH, 0, 0, _stream(stream), ns, ns, False)

    def memcpy(self, nbytes, kind="h2d", pinned=True, stream=0):
        """Copy ``nbytes``: ``kind`` is "h2d", "d2h" or "d2d".

        A pinned copy is asynchronous (cudaMemcpyAsync from page-locked
        memory). A pageable h2d/d2h copy is slower and blocks until it is done.
        """
        if kind not in _KINDS:
            raise ValueError("memcpy kind must be one of h2d, d2h, d2d: %r" % (kind,))
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError("memcpy size must not be negative: %r" % (nbytes,))
        c = self._conn()
        blocking = not pinned and kind != "d2d"
        bw = float(c.bandwidth.get(kind, 0)) or 0.0
        if blocking:
            bw *= c.pageable_factor
        duration_ns = int(nbytes / bw * 1e9) if bw > 0 else 0
        flags = _FLAG_PINNED if pinned else 0
        c.submit(_OP_MEMCPY, flags, _KINDS[kind], _stream(stream), nbytes, duration_ns, blocking)

    def synchronize(self, stream=None):
        """Block until ``stream``'s work (None: every stream of this process) has ended."""
        c = self._conn()
        if stream is None:
            t, _ = c.call(_OP_SYNC_DEVICE, 0, 0, 0, 0)
            streams = list(c.mirror)
        else:
            t, _ = c.call(_OP_SYNC, 0, 0, _stream(stream), 0)
            streams = [_stream(stream)]
        for s in streams:
            m = c.mirror.get(s)
            if m is not None:
                m[0].clear()
                m[1] = t

    @property
    def pid(self):
        """This process as the device identifies it."""
        return int(self._conn().hello.get("pid", 0))

    def close(self):
        """Close every connection this object opened."""
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            c.close()
        self._local = threading.local()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def _stream(stream):
    s = int(stream)
    if s < 0 or s > 0xFFFFFFFF:
        raise ValueError("stream must be in [0, 2**32): %r" % (stream,))
    return s
