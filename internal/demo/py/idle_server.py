"""idle-server: an inference server that nobody calls.

It loads its model on the GPU (a warm-up kernel and a synchronise), listens
on a TCP port on the loopback interface and waits in accept() for a client
that never comes. Nothing runs, the GPU idles: the job is idle, waiting for
requests, not stalled.
"""

import socket

from demo_common import connect, ready

dev = connect()
dev.launch(100)
dev.synchronize()
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(16)
ready()
while True:
    conn, _ = srv.accept()
    conn.close()
