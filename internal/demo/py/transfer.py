"""transfer-bound: large copies from pageable host memory.

Each step copies a 64 MiB batch to the device from pageable memory (a
tensor that was never pinned: CUDA stages it through a bounce buffer at
about half the link's rate, and the call blocks until it is done), then
launches 0.6 ms of kernels: the copy engines are busy, the kernels mostly
idle, and the thread waits on every copy.
"""

from demo_common import burn, connect, ready, running

BATCH_BYTES = 64 << 20
KERNELS, KERNEL_US, CPU_S = 2, 300, 0.0003

dev = connect()
ready()
while running():
    dev.memcpy(BATCH_BYTES, kind="h2d", pinned=False)
    for _ in range(KERNELS):
        dev.launch(KERNEL_US)
    burn(CPU_S)
