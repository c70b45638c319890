"""A small real training loop on the CPU whose Python time has one known
home, for the sampled Python stacks (diagnose --py-stacks):

  --mode loader: one DataLoader worker computes each sample slowly, so the
                 training loop waits in the DataLoader's __next__;
  --mode item:   the loop reads its outputs back element by element with
                 .item(), one call per value (a host-device synchronisation
                 each on a GPU);
  --mode optim:  a model of many small parameters stepped by a per-parameter
                 (for-loop) optimizer: the step dominates;
  --mode transforms: torchvision's FakeData with a torchvision augmentation
                 pipeline (crop, flip, colour jitter, to tensor, normalise)
                 as its transform, read by a DataLoader without workers
                 (num_workers=0, the default): the training loop's own
                 thread runs the transforms inside the DataLoader's __next__;
  --mode batch-transforms: a DataLoader of ready tensors, and the loop
                 augments each batch with torchvision's transforms on the
                 CPU (what would be done on the GPU on whole batches).

Runs under Debian's own python3 with python3-torch (and python3-torchvision
for the two transforms modes). With --control FILE the loop moves to the
mode the file names (or pauses: "pause"), so that one process, whose start
(importing torch) is most of a test's time, serves several tests.

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


class Ready(Dataset):
    """Images already decoded, as uint8-range float tensors: fetching one
    costs an index."""

    def __init__(self):
        self.images = torch.rand(64, 3, 64, 64)

    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        return self.images[i % len(self.images)], i % 8


def build(mode):
    """The loop's parts for a mode: the loader, the model, the optimizer and
    the per-batch augmentation (None but for batch-transforms)."""
    if mode == "optim":
        model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(200)])
        # Adam's per-parameter (for-loop) step does several tensor ops per
        # parameter: with 400 small parameters it outweighs the forward and
        # backward passes clearly, even on a crowded host.
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    else:
        model = torch.nn.Linear(8, 8)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False)
    workers, cost = (1, 20000) if mode == "loader" else (0, 10)
    loader = DataLoader(Slow(cost), batch_size=16, num_workers=workers)
    augment = None
    if mode in ("transforms", "batch-transforms"):
        import torchvision
        import torchvision.transforms as T
        pipeline = [T.RandomResizedCrop(48), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4, 0.1)]
        norm = T.Normalize([0.5] * 3, [0.25] * 3)
        if mode == "transforms":
            data = torchvision.datasets.FakeData(size=1 << 30, image_size=(3, 64, 64), num_classes=8,
                                                 transform=T.Compose(pipeline + [T.ToTensor(), norm]))
            loader = DataLoader(data, batch_size=16, num_workers=0)
        else:
            loader = DataLoader(Ready(), batch_size=16, num_workers=0)
            augment = T.Compose(pipeline + [norm])
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.AdaptiveAvgPool2d(1),
                                    torch.nn.Flatten(), torch.nn.Linear(4, 8))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9, foreach=False)
    return loader, model, opt, augment


class Control:
    """The mode a test wants now, read from --control at most every 0.2 s:
    one of --modes, "pause", or None (no file: keep going)."""

    def __init__(self, path):
        self.path, self.next, self.value = path, 0.0, None

    def get(self):
        now = time.monotonic()
        if self.path and now >= self.next:
            self.next = now + 0.2
            try:
                with open(self.path) as f:
                    self.value = f.read().strip() or None
            except OSError:
                self.value = None
        return self.value


def run(mode, control, end):
    """Trains in one mode until the control file names another (returned),
    or the time is up (None)."""
    loader, model, opt, augment = build(mode)
    say("started", mode=mode)
    for n, batch in enumerate(loader):
        if end is not None and time.monotonic() > end:
            return None
        want = control.get()
        if want is not None and want != mode:
            return want
        if mode in ("transforms", "batch-transforms"):
            batch = batch[0]  # (images, labels)
        if augment is not None:
            batch = augment(batch)  # the whole batch, in this thread
        inp = batch[:, :4].repeat(1, 1) if mode == "optim" else batch
        out = model(inp)
        loss = out.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if mode == "item":
            vals, total = out.detach().flatten().repeat(100), 0.0
            for i in range(vals.numel()):
                total += vals[i].item()  # one copy back per value
        if n == 20:
            say("steady", mode=mode)
    return None


MODES = ["loader", "item", "optim", "transforms", "batch-transforms"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=MODES, default="loader")
    p.add_argument("--seconds", type=float, default=0, help="end after this long (0: never)")
    p.add_argument("--control", default="",
                   help="a file naming the mode the loop runs in now (or 'pause': no steps); "
                        "the loop moves to it within a fifth of a second and says 'steady' with the mode")
    a = p.parse_args()
    torch.set_num_threads(1)
    control = Control(a.control)
    end = time.monotonic() + a.seconds if a.seconds > 0 else None
    mode = control.get() or a.mode
    while mode is not None:
        if mode == "pause":
            time.sleep(0.1)
            want = control.get()
            mode = want if want in MODES else "pause"
            continue
        if mode not in MODES:
            raise SystemExit("--control: unknown mode %r" % mode)
        mode = run(mode, control, end)


if __name__ == "__main__":
    main()
