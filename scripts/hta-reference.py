#!/usr/bin/env python3
"""Print Holistic Trace Analysis' own numbers for one trace directory as JSON.

gpufeed's tests and scripts/bench-trace.sh compare against this output.
HTA is not vendored: pass the path of a checkout of
github.com/facebookresearch/HolisticTraceAnalysis kept outside this
repository, and run with Debian's python3 (python3-pandas, python3-numpy,
python3-plotly, python3-networkx, python3-psutil, python3-yaml):

    PYTHONPATH=/work/hta /usr/bin/python3 scripts/hta-reference.py TRACE_DIR

Times are HTA's: microseconds, after HTA's own rounding of ns-resolution
traces.
"""
import json
import logging
import sys

logging.disable(logging.WARNING)

from hta.trace_analysis import TraceAnalysis  # noqa: E402


def main(trace_dir):
    ta = TraceAnalysis(trace_dir=trace_dir)
    out = {"trace_dir": trace_dir, "ranks": {}}
    ranks = ta.t.get_ranks()
    try:
        temporal = ta.get_temporal_breakdown(visualize=False) if ranks else None
    except Exception as e:  # HTA fails on traces without GPU events
        temporal = None
        out["error"] = "temporal breakdown: %s: %s" % (type(e).__name__, e)
    for rank in ranks:
        r = {}
        if temporal is not None:
            row = temporal[temporal["rank"] == rank].iloc[0]
            r["temporal_us"] = {
                "idle": int(row["idle_time(us)"]),
                "compute": int(row["compute_time(us)"]),
                "non_compute": int(row["non_compute_time(us)"]),
                "span": int(row["kernel_time(us)"]),
            }
        try:
            idle, _ = ta.get_idle_time_breakdown(ranks=[rank], visualize=False)
        except Exception as e:
            r["error"] = "idle time breakdown: %s: %s" % (type(e).__name__, e)
            out["ranks"][str(rank)] = r
            continue
        streams = {}
        for _, row in idle.iterrows():
            streams.setdefault(str(int(row["stream"])), {})[row["idle_category"]] = float(row["idle_time"])
        r["idle_us"] = streams
        launch = ta.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
        r["launches"] = int(len(launch))
        q = ta.get_queue_length_summary(ranks=[rank])
        if q is not None:
            r["queue_length"] = {
                str(int(stream)): {k: float(v) for k, v in q.loc[(rank, stream)]["queue_length"].to_dict().items()}
                for (_, stream) in q.index
            }
        out["ranks"][str(rank)] = r
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: hta-reference.py TRACE_DIR")
    main(sys.argv[1])
