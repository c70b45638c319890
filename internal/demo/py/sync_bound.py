"""sync-bound: a synchronisation after every few kernels, .item()-style.

Each step queues four 1 ms kernels, then waits for them (as loss.item() or
a Python test on a GPU tensor does), then spends 1 ms of CPU on the result
before it queues the next step: the CPU never runs ahead, the GPU idles
while the CPU works and the CPU sleeps while the GPU works. The GPU work
per step is four times the CPU work, so the CPU would keep it fed if it
did not wait: the waits are the problem even when other processes slow
the CPU work down several times.
"""

from demo_common import burn, connect, ready, running

KERNELS, KERNEL_US, CPU_S = 4, 1000, 0.001

dev = connect()
ready()
while running():
    for _ in range(KERNELS):
        dev.launch(KERNEL_US)
    dev.synchronize()  # loss.item()
    burn(CPU_S)
