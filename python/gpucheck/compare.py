"""The comparisons of scripts/gpu-check.sh, each written as a table (text)
and a JSON file into the check's output directory. Standard library only.

    python3 compare.py nvml DIAGNOSE.json SMI.csv OUT      NVML (as gpufeed read it) against nvidia-smi
    python3 compare.py verdicts OUTDIR                      diagnose's verdict against the trace's, per workload
    python3 compare.py uprobe LIB OUT -- CMD...             whether a uprobe on LIB's cuLaunchKernel attaches and fires
"""
import csv
import json
import os
import statistics
import struct
import subprocess
import sys


def write(out, rows, head, data):
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head] + rows]
    with open(out + ".txt", "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(out + ".json", "w") as f:
        json.dump(data, f, indent=2)
    print("\n".join(lines))


def num(s):
    s = (s or "").strip().split(" ")[0]
    try:
        return float(s)
    except ValueError:
        return None


def nvml(diag_path, smi_path, out):
    """gpufeed's NVML readings of the window against nvidia-smi's, sampled
    over the same window: each reading agrees within a tolerance made of
    the two tools' sampling differences."""
    with open(diag_path) as f:
        rep = json.load(f)
    with open(smi_path) as f:
        smi = [r for r in csv.DictReader(f, skipinitialspace=True)]
    if not smi:
        sys.exit("compare.py nvml: no nvidia-smi readings")
    key = lambda name: next((k for k in smi[0] if k.split(" [")[0] == name), None)
    med = lambda name: statistics.median([v for v in (num(r[key(name)]) for r in smi) if v is not None] or [float("nan")])
    g = (rep.get("gpus") or [{}])[0]
    checks = [
        ("name", g.get("name"), smi[0][key("name")].strip(), lambda a, b: a == b, "equal"),
        ("utilisation p50 %", g.get("util_p50_percent"), med("utilization.gpu"), lambda a, b: abs(a - b) <= 10, "within 10 points"),
        ("SM clock p50 MHz", g.get("sm_clock_p50_mhz"), med("clocks.sm"), lambda a, b: abs(a - b) <= 0.05 * b, "within 5 %"),
        ("max SM clock MHz", g.get("max_sm_clock_mhz"), med("clocks.max.sm"), lambda a, b: abs(a - b) <= 1, "equal"),
        ("power p50 W", g.get("power_p50_w"), med("power.draw"), lambda a, b: abs(a - b) <= 0.15 * b, "within 15 %"),
        ("power limit W", g.get("power_limit_w"), med("power.limit"), lambda a, b: abs(a - b) <= 1, "equal"),
    ]
    rows, data = [], []
    for what, ours, theirs, ok, tol in checks:
        if ours is None or theirs is None or theirs != theirs:
            verdict = "not compared (a reading missing)"
        else:
            verdict = "agree" if ok(ours, theirs) else "DIFFER"
        rows.append((what, ours, theirs, tol, verdict))
        data.append({"reading": what, "gpufeed": ours, "nvidia_smi": theirs, "tolerance": tol, "result": verdict})
    write(out, rows, ("reading", "gpufeed (NVML)", "nvidia-smi", "tolerance", "result"), data)
    return 0 if all(d["result"] != "DIFFER" for d in data) else 1


EXPECTED = {
    "launch": ["submission-bound"],
    "sync-spin": ["sync-bound", "inconclusive"],  # spinning looks like launching from outside the thread
    "sync-blocking": ["sync-bound"],
    "preprocess": ["submission-bound", "preprocessing-bound"],
    "transfer": ["transfer-bound"],
    "gpu": ["gpu-bound"],
}


def verdicts(outdir):
    """Per workload: the class the workload is built to produce, the one
    gpufeed diagnose gave live, and the one gpufeed trace gave on the
    profiler trace of the same run."""
    rows, data = [], []
    for w in EXPECTED:
        d = os.path.join(outdir, "workloads", w)
        entry = {"workload": w, "expected": EXPECTED[w], "diagnose": None, "trace": None}
        skip = os.path.join(d, "skipped.txt")
        if os.path.exists(skip):
            entry["result"] = "skipped: " + open(skip).read().strip()
        else:
            for what, name, get in (("diagnose", "diagnose.json", lambda r: r["verdict"]["class"]),
                                    ("trace", "trace-report.json", lambda r: r["reports"][0]["verdict"]["class"])):
                try:
                    with open(os.path.join(d, name)) as f:
                        entry[what] = get(json.load(f))
                except (OSError, ValueError, KeyError, IndexError) as e:
                    entry[what + "_error"] = f"{name}: {e}"
            dg, tr = entry["diagnose"], entry["trace"]
            if dg is None or tr is None:
                entry["result"] = "incomplete"
            elif dg == tr:
                entry["result"] = "agree" + ("" if dg in EXPECTED[w] else " (not the expected class)")
            else:
                entry["result"] = "DIFFER" + ("" if dg in EXPECTED[w] else ", diagnose not the expected class")
        rows.append((w, "/".join(EXPECTED[w]), entry["diagnose"] or "-", entry["trace"] or "-", entry["result"]))
        data.append(entry)
    write(os.path.join(outdir, "verdicts"), rows, ("workload", "expected", "diagnose", "trace (ground truth)", "result"), data)
    return 0


def dynsym_offset(path, name):
    """The file offset of a dynamic symbol of an ELF64 little-endian
    shared object (what a uprobe is placed at), read from its section
    headers."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:4] != b"\x7fELF" or b[4] != 2 or b[5] != 1:
        raise ValueError(f"{path}: not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    for s in secs:
        if s[1] != 11:  # SHT_DYNSYM
            continue
        strtab = secs[s[6]]
        for off in range(s[4], s[4] + s[5], 24):
            st_name, st_info, _, st_shndx, st_value, _ = struct.unpack_from("<IBBHQQ", b, off)
            start = strtab[4] + st_name
            sym = b[start:b.index(b"\0", start)].decode()
            if sym == name and st_value:
                sec = secs[st_shndx]
                return st_value - sec[3] + sec[4]  # address - section address + section offset
    raise ValueError(f"{path}: no dynamic symbol {name}")


def perf_uprobe(path, offset):
    """Open a counting uprobe on path:offset with perf_event_open, one per
    CPU, for every process (what an eBPF uprobe attaches through: the
    uprobe PMU, no tracefs needed). Returns the file descriptors."""
    import ctypes

    with open("/sys/bus/event_source/devices/uprobe/type") as f:
        pmu = int(f.read())
    nr = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
    if nr is None:
        raise OSError("perf_event_open: unknown syscall number on " + os.uname().machine)
    libc = ctypes.CDLL(None, use_errno=True)
    cpath = ctypes.create_string_buffer(path.encode())
    attr = ctypes.create_string_buffer(128)
    struct.pack_into("<IIQ", attr, 0, pmu, 128, 0)
    struct.pack_into("<Q", attr, 40, 1 | (1 << 5) | (1 << 6))  # disabled, exclude_kernel, exclude_hv
    struct.pack_into("<QQ", attr, 56, ctypes.addressof(cpath), offset)
    fds = []
    for cpu in range(os.cpu_count() or 1):
        fd = libc.syscall(nr, attr, -1, cpu, -1, 0)
        if fd < 0:
            e = ctypes.get_errno()
            for x in fds:
                os.close(x)
            raise OSError(e, "perf_event_open(uprobe %s:%#x, cpu %d): %s" % (path, offset, cpu, os.strerror(e)))
        fds.append(fd)
    return fds, cpath


def uprobe(lib, out, cmd):
    """Place a uprobe on LIB's cuLaunchKernel (perf_event_open on the uprobe
    PMU: no perf, no bpftool, no tracefs), run CMD, and count its hits."""
    import fcntl

    res = {"library": lib, "symbol": "cuLaunchKernel"}
    try:
        real = os.path.realpath(lib)
        res["path"] = real
        off = dynsym_offset(real, "cuLaunchKernel")
        res["offset"] = hex(off)
        fds, keep = perf_uprobe(real, off)
        try:
            for fd in fds:
                fcntl.ioctl(fd, 0x2400)  # PERF_EVENT_IOC_ENABLE
            p = subprocess.run(cmd, capture_output=True, timeout=120)
            res["command_status"] = p.returncode
            res["hits"] = sum(struct.unpack("<Q", os.read(fd, 8))[0] for fd in fds)
        finally:
            for fd in fds:
                os.close(fd)
        res["result"] = "attached, %d hits" % res["hits"] if res["hits"] else "attached, no hits"
    except (OSError, ValueError, subprocess.SubprocessError) as e:
        res["result"] = "not attached"
        res["error"] = str(e)
    write(out, [(real if "path" in res else lib, res.get("offset", "-"), res["result"], res.get("error", ""))],
          ("library", "cuLaunchKernel offset", "uprobe", "why"), res)
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "nvml":
        sys.exit(nvml(sys.argv[2], sys.argv[3], sys.argv[4]))
    if len(sys.argv) == 3 and sys.argv[1] == "verdicts":
        sys.exit(verdicts(sys.argv[2]))
    if len(sys.argv) >= 6 and sys.argv[1] == "uprobe" and sys.argv[4] == "--":
        sys.exit(uprobe(sys.argv[2], sys.argv[3], sys.argv[5:]))
    sys.exit(__doc__)
