# gpufeed's syscalls drill: a small multi-worker training loop. A
# DataLoader with worker processes (fork) builds batches; the training
# thread moves each to the device and takes an optimizer step. Its system
# calls are those of a real training step: futex (threads waiting on each
# other and for the next batch), poll and read (the DataLoader's queues),
# accept4 and recvmsg (tensors handed over in shared memory by file
# descriptor passing), ioctl (the CUDA driver, on a GPU), mmap/munmap.
#
# It prints one JSON line {"ready": pid, "workers": [pids]} once the
# workers run, then trains until --seconds have passed.
import json
import os
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

workers, seconds = int(sys.argv[1]), float(sys.argv[2])
dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")


class Images(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        x = torch.rand(3, 32, 32, generator=g)
        x = (x - 0.5) / 0.25  # a transform's worth of work
        return x, i % 10


model = torch.nn.Sequential(
    torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(4),
    torch.nn.Flatten(), torch.nn.Linear(256, 10)).to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = torch.nn.CrossEntropyLoss()
loader = DataLoader(Images(), batch_size=64, shuffle=True, num_workers=workers,
                    multiprocessing_context="fork", persistent_workers=True)
it = iter(loader)
next(it)
pids = [w.pid for w in getattr(it, "_workers", [])]
print(json.dumps({"ready": os.getpid(), "workers": pids, "device": str(dev)}), flush=True)
end = time.monotonic() + seconds
while time.monotonic() < end:
    try:
        x, y = next(it)
    except StopIteration:
        it = iter(loader)
        continue
    x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
    opt.zero_grad(set_to_none=True)
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    loss.item()
