"""gpu-bound-sync: a healthy GPU-bound loop that synchronises every step.

Each step queues fifty 1 ms kernels, then waits for them (a synchronise, as
reading the loss every step does). The GPU is busy about 98 % of the time;
the host thread spends almost all of it asleep in the synchronise, woken
about twenty times a second, using well under 1 % of a core. Low CPU is not
a stall: the synchronise keeps returning.
"""

from demo_common import connect, ready, running

KERNELS, KERNEL_US = 50, 1000

dev = connect()
ready()
while running():
    for _ in range(KERNELS):
        dev.launch(KERNEL_US)
    dev.synchronize()
