"""gpu-bound: a healthy training loop.

Each step spends 1 ms of CPU preparing a batch, then queues twenty 1 ms
kernels without waiting; the loss is read (a synchronisation) every 25
steps, as a logging interval does. The CPU runs ahead of the GPU and the
launch queue absorbs its hiccups, even when other processes leave it a
tenth of a core: the GPU stays busy.
"""

from demo_common import burn, connect, ready, running

CPU_S, KERNELS, KERNEL_US, LOG_EVERY = 0.001, 20, 1000, 25

dev = connect()
ready()
step = 0
while running():
    burn(CPU_S)
    for _ in range(KERNELS):
        dev.launch(KERNEL_US)
    step += 1
    if step % LOG_EVERY == 0:
        dev.synchronize()  # log the loss
