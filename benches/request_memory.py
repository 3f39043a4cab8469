#!/usr/bin/env python3
"""Peak memory of the serve process per request shape, for benches/request_memory.sh.

For each hostile body shape (filled up to --bytes): start a fresh server, read its VmRSS, send one
request (then, on another fresh server, --concurrent at once), read VmHWM (the peak resident set)
from /proc/<pid>/status, and print one JSON line per run: the growth of the peak over the idle
RSS, the request bytes sent at once, and their ratio. Python standard library only.
"""

import argparse
import http.client
import json
import os
import socket
import ssl
import subprocess
import threading
import time


def status_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def thp_enabled(pid):
    """Whether the kernel may back the server's memory with transparent huge pages (2 MiB resident
    steps), as /proc/<pid>/status says (None on kernels that do not say)."""
    try:
        return status_kib(pid, "THP_enabled") == 1
    except KeyError:
        return None


def review(uid, filler, in_container=False):
    """A Pod CREATE for /mutate-pod whose spec carries `filler` (raw JSON text) in an unknown field,
    or, `in_container`, as its container's `env` (where a real Pod dense with variables has them:
    the apiserver drops a Pod's unknown fields before admission)."""
    container = {"name": "app", "image": "nginx"}
    if in_container:
        container["env"] = "@@"
    head = json.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {"uid": uid, "operation": "CREATE", "namespace": "default",
                    "kind": {"group": "", "version": "v1", "kind": "Pod"},
                    "resource": {"group": "", "version": "v1", "resource": "pods"},
                    "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
                    "object": {"apiVersion": "v1", "kind": "Pod",
                               "metadata": {"name": "p", "namespace": "default",
                                            "annotations": {"kruise-admission.dev/target-node": "worker-1"}},
                               "spec": {"containers": [container], **({} if in_container else {"filler": "@@"})}}}})
    return head.replace('"@@"', filler).encode()


def repeat_to(unit, size, open_="[", close="]", sep=","):
    n = max(1, (size - len(open_) - len(close)) // (len(unit) + len(sep)))
    return open_ + sep.join([unit] * n) + close


# Shapes whose filler is the container's `env` rather than an unknown spec field.
IN_CONTAINER = {"container-env"}


def shapes(size):
    room = size - 600  # the envelope around the filler
    deep = "{\"a\":" * 20 + "0" + "}" * 20
    env = json.dumps({"name": "VAR_000000", "value": "v" * 70})
    return {
        "tiny-values": repeat_to("0", room),
        "empty-objects": repeat_to("{}", room),
        "one-key-objects": repeat_to("{\"a\":0}", room),
        "deep-objects": repeat_to(deep, room),
        "long-string": json.dumps("x" * (room - 2)),
        "env-vars": repeat_to(env, room),
        "container-env": repeat_to(env, room),
    }


def post(port, ca, body, results, i):
    context = ssl.create_default_context(cafile=ca)
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=60)
    try:
        conn.request("POST", "/mutate-pod?timeout=10s", body=body, headers={"Content-Type": "application/json"})
        reply = conn.getresponse()
        reply.read()
        results[i] = reply.status
    except Exception as error:  # a refused or reset request is a result too
        results[i] = repr(error)
    finally:
        conn.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run(args, shape, filler, concurrent):
    port, metrics = free_port(), free_port()
    server = subprocess.Popen(
        [args.binary, "serve", "--listen", f"127.0.0.1:{port}", "--metrics-listen", f"127.0.0.1:{metrics}",
         "--tls-cert-file", f"{args.certs}/tls.crt", "--tls-key-file", f"{args.certs}/tls.key",
         "--cluster-dir", args.cluster] + args.serve_arg,
        stderr=subprocess.DEVNULL, env={**os.environ, "RUST_LOG": "error"})
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
                break
            except OSError:
                time.sleep(0.05)
        # One small request first, so TLS and the first-request allocations are in the idle figure.
        warm = [None]
        post(port, f"{args.certs}/ca.crt", review("warm", "0"), warm, 0)
        time.sleep(0.3)
        idle = status_kib(server.pid, "VmRSS")
        bodies = [review(f"u{i}", filler, shape in IN_CONTAINER) for i in range(concurrent)]
        results = [None] * concurrent
        threads = [threading.Thread(target=post, args=(port, f"{args.certs}/ca.crt", bodies[i], results, i)) for i in range(concurrent)]
        started = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        took = time.monotonic() - started
        peak = status_kib(server.pid, "VmHWM")
        thp = thp_enabled(server.pid)
        sent = sum(len(b) for b in bodies)
        codes = {}
        for r in results:
            codes[str(r)] = codes.get(str(r), 0) + 1
        growth = (peak - idle) * 1024
        print(json.dumps({"shape": shape, "concurrent": concurrent, "body_bytes": len(bodies[0]), "sent_bytes": sent,
                          "idle_rss_mib": round(idle / 1024, 1), "peak_rss_mib": round(peak / 1024, 1),
                          "growth_mib": round(growth / 2**20, 1), "growth_per_sent_byte": round(growth / sent, 2),
                          "answers": codes, "seconds": round(took, 2), "thp_enabled": thp}), flush=True)
    finally:
        server.terminate()
        server.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--print-body", metavar="SHAPE", help="only print the body of SHAPE (for benches/request_memory.rs)")
    parser.add_argument("--binary")
    parser.add_argument("--certs")
    parser.add_argument("--cluster")
    parser.add_argument("--bytes", type=int, required=True)
    parser.add_argument("--concurrent", type=int, default=16)
    parser.add_argument("--shape", action="append", help="only these shapes (default: all)")
    parser.add_argument("--serve-arg", action="append", default=[], help="extra argument for serve (repeatable)")
    args = parser.parse_args()
    if args.print_body:
        os.write(1, review("u0", shapes(args.bytes)[args.print_body], args.print_body in IN_CONTAINER))
        return
    if not (args.binary and args.certs and args.cluster):
        parser.error("--binary, --certs and --cluster are required")
    for shape, filler in shapes(args.bytes).items():
        if args.shape and shape not in args.shape:
            continue
        run(args, shape, filler, 1)
        run(args, shape, filler, args.concurrent)


if __name__ == "__main__":
    main()
