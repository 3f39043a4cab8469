#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that can stall (tests/e2e/recovery.sh).

    stall_proxy.py LISTEN-PORT UPSTREAM-PORT MODE-FILE

Forwards every connection to 127.0.0.1:UPSTREAM-PORT byte for byte (TLS passes through). MODE-FILE
holds `forward` or `stall` (re-read every 50 ms; missing means forward). When it turns to `stall`,
every open connection stops forwarding in both directions for good, its sockets left open: what a
load balancer, NAT or proxy that lost a flow without resetting it looks like to both ends.
Connections accepted while stalled wait, unanswered, until the mode is `forward` again, then are
forwarded. A connection the upstream refuses is closed.
"""

import socket
import sys
import threading
import time

listen_port, upstream_port, mode_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
state = {"stalls": 0, "stalled": False}
lock = threading.Condition()


def read_mode():
    try:
        with open(mode_file) as f:
            return f.read().strip() or "forward"
    except OSError:
        return "forward"


def follow_mode():
    while True:
        stalled = read_mode() == "stall"
        with lock:
            if stalled and not state["stalled"]:
                state["stalls"] += 1
            state["stalled"] = stalled
            lock.notify_all()
        time.sleep(0.05)


def pipe(src, dst, generation):
    """Copy src to dst until either closes or a stall begins after this connection started."""
    try:
        while True:
            data = src.recv(65536)
            with lock:
                frozen = state["stalls"] != generation
            if frozen:
                # Stop forwarding, keep both sockets open: nothing more is read or written.
                while True:
                    time.sleep(3600)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(client):
    with lock:
        while state["stalled"]:
            lock.wait()
        generation = state["stalls"]
    try:
        upstream = socket.create_connection(("127.0.0.1", upstream_port), timeout=5)
        upstream.settimeout(None)
    except OSError:
        client.close()
        return
    threading.Thread(target=pipe, args=(client, upstream, generation), daemon=True).start()
    threading.Thread(target=pipe, args=(upstream, client, generation), daemon=True).start()


def main():
    threading.Thread(target=follow_mode, daemon=True).start()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", listen_port))
    server.listen(128)
    while True:
        client, _ = server.accept()
        threading.Thread(target=serve, args=(client,), daemon=True).start()


main()
