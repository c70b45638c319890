"""Shared by the workloads: one JSON object per line on stdout tells the Go
harness what happened (pids, ranks, phases). Standard library only."""
import json
import os
import sys


def say(event, **fields):
    fields["event"] = event
    fields.setdefault("pid", os.getpid())
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()
