"""A small real training loop on the CPU whose Python time has one known
home, for the sampled Python stacks (diagnose --py-stacks):

  --mode loader: one DataLoader worker computes each sample slowly, so the
                 training loop waits in the DataLoader's __next__;
  --mode item:   the loop reads its outputs back element by element with
                 .item(), one call per value (a host-device synchronisation
                 each on a GPU);
  --mode optim:  a model of many small parameters stepped by a per-parameter
                 (for-loop) optimizer: the step dominates.

Runs under Debian's own python3 with python3-torch.

    /usr/bin/python3 torch_pytime.py --mode loader
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import say  # noqa: E402

import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402


class Slow(Dataset):
    def __init__(self, cost):
        self.cost = cost

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        x = 0
        for k in range(self.cost):  # pure-Python work in the worker
            x += k * k
        return torch.full((8,), float(x % 7))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["loader", "item", "optim"], default="loader")
    p.add_argument("--seconds", type=float, default=0, help="end after this long (0: never)")
    a = p.parse_args()
    torch.set_num_threads(1)
    if a.mode == "optim":
        model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(200)])
    else:
        model = torch.nn.Linear(8, 8)
    if a.mode == "optim":
        # Adam's per-parameter (for-loop) step does several tensor ops per
        # parameter: with 400 small parameters it outweighs the forward and
        # backward passes clearly, even on a crowded host.
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False)
    workers, cost = (1, 20000) if a.mode == "loader" else (0, 10)
    loader = DataLoader(Slow(cost), batch_size=16, num_workers=workers)
    say("started", mode=a.mode)
    end = time.monotonic() + a.seconds if a.seconds > 0 else None
    for n, batch in enumerate(loader):
        if end is not None and time.monotonic() > end:
            break
        inp = batch[:, :4].repeat(1, 1) if a.mode == "optim" else batch
        out = model(inp)
        loss = out.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if a.mode == "item":
            vals, total = out.detach().flatten().repeat(100), 0.0
            for i in range(vals.numel()):
                total += vals[i].item()  # one copy back per value
        if n == 20:
            say("steady")


if __name__ == "__main__":
    main()
