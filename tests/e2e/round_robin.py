#!/usr/bin/env python3
"""A TCP round-robin on 127.0.0.1 (tests/e2e/pod_budgets.sh): two replicas of ours behind one URL.

    round_robin.py LISTEN-PORT UPSTREAM-PORT...

Each accepted connection goes to the next upstream port in turn, byte for byte (TLS passes
through); an upstream that refuses is skipped for that connection. The API server keeps webhook
connections alive, so it opens several at once under load and they alternate between replicas.
"""

import itertools
import socket
import sys
import threading

listen_port = int(sys.argv[1])
upstreams = itertools.cycle([int(p) for p in sys.argv[2:]])
count = len(sys.argv) - 2
turn = threading.Lock()


def pipe(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client):
    for _ in range(count):
        with turn:
            port = next(upstreams)
        try:
            upstream = socket.create_connection(("127.0.0.1", port), timeout=5)
            upstream.settimeout(None)
            break
        except OSError:
            continue
    else:
        client.close()
        return
    for s in (client, upstream):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pipe, args=(upstream, client), daemon=True).start()
    pipe(client, upstream)


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", listen_port))
listener.listen(256)
while True:
    connection, _ = listener.accept()
    threading.Thread(target=serve, args=(connection,), daemon=True).start()
