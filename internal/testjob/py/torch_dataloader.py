"""A real torch.utils.data.DataLoader: --workers worker processes forked
(multiprocessing_context="fork") from a trainer that holds the dataset, the
trainer taking a --step second "training step" per batch.

With --storage list the dataset is a Python list of float objects: a worker
reading an item increments its reference count, a write to the page holding
it, so copy-on-write gives the worker its own copy of every page it reads and
its unique memory (USS) climbs while its resident memory stays flat. With
--storage numpy the same numbers are one numpy array: reading an item writes
nothing shared, and each worker stays at what a fresh fork holds. With
--start-method spawn the workers start from a fresh interpreter and are sent
the dataset: they inherit no memory to copy. With --shuffle the items are read
in random order, so each worker touches (and copies) every page of a list
within its first seconds, then copies little more.

Runs under Debian's own python3 with python3-torch and python3-numpy.

    /usr/bin/python3 torch_dataloader.py --storage list --workers 4 --items 3000000
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import say  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402,F401
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Items(Dataset):
    def __init__(self, storage, n):
        if storage == "list":
            self.data = [float(i) for i in range(n)]
        else:
            self.data = np.arange(n, dtype=np.float64)

    def __len__(self):
        return len(self.data)

    def __getitem__(self, i):
        return self.data[i]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--storage", choices=["list", "numpy"], default="list")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--items", type=int, default=3_000_000)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--step", type=float, default=0.005)
    p.add_argument("--start-method", choices=["fork", "spawn"], default="fork")
    p.add_argument("--shuffle", action="store_true", help="read in random order: each worker touches every page within seconds")
    a = p.parse_args()
    loader = DataLoader(Items(a.storage, a.items), batch_size=a.batch, num_workers=a.workers,
                        multiprocessing_context=a.start_method, persistent_workers=True, shuffle=a.shuffle)
    announced = False
    while True:
        it = iter(loader)
        for n, _ in enumerate(it):
            if not announced and n == 2 * a.workers:
                say("workers", workers=[w.pid for w in getattr(it, "_workers", [])], storage=a.storage)
                announced = True
            time.sleep(a.step)


if __name__ == "__main__":
    main()
