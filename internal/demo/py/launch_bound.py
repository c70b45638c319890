"""launch-bound: one thread launching tiny kernels.

Each kernel runs 2 us on the device, but submitting it costs the Python
thread several microseconds (the interpreter, the client, one system call):
the thread runs flat out and the GPU idles between kernels, as eager-mode
PyTorch does on a model made of many small operations.
"""

from demo_common import connect, ready, running

KERNEL_US = 2

dev = connect()
ready()
while running():
    for _ in range(100):
        dev.launch(KERNEL_US)
