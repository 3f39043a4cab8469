#!/usr/bin/env python3
"""Fixed-rate HTTPS load for benches/soak.sh (Python standard library only, so the soak needs no
extra build on a shared CI machine).

Sends the review bodies given (round-robin) to --url at --rate requests per second for --seconds,
over keep-alive HTTP/1.1 connections that verify the server against --ca. Every connection is
replaced after --reconnect-every requests, so new TLS handshakes keep meeting freshly rotated
serving certificates. A request fails when it errors, is not HTTP 200, or the answer is not an
AdmissionReview for the request's uid. Prints one JSON summary line.
"""

import argparse
import http.client
import json
import ssl
import threading
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--path", default="/mutate-pod")
    parser.add_argument("--ca", required=True)
    parser.add_argument("--rate", type=float, default=100)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--reconnect-every", type=int, default=200)
    parser.add_argument("reviews", nargs="+")
    args = parser.parse_args()

    bodies = []
    for path in args.reviews:
        with open(path, "rb") as f:
            raw = f.read()
        bodies.append((raw, json.loads(raw)["request"]["uid"]))
    context = ssl.create_default_context(cafile=args.ca)
    context.minimum_version = ssl.TLSVersion.TLSv1_2

    lock = threading.Lock()
    latencies, failures, patched, late = [], [], [0], [0]
    total = int(args.rate * args.seconds)
    start = time.monotonic() + 0.2

    def worker(k):
        conn, used = None, 0
        for i in range(k, total, args.workers):
            due = start + i / args.rate
            pause = due - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            elif pause < -0.1:
                with lock:
                    late[0] += 1
            body, uid = bodies[i % len(bodies)]
            if conn is None or used >= args.reconnect_every:
                if conn is not None:
                    conn.close()
                conn, used = http.client.HTTPSConnection(args.host, args.port, context=context, timeout=10), 0
            used += 1
            sent = time.monotonic()
            try:
                conn.request("POST", args.path, body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                data = response.read()
                took = time.monotonic() - sent
                answer = json.loads(data) if response.status == 200 else None
                ok = answer is not None and answer.get("response", {}).get("uid") == uid
                with lock:
                    if ok:
                        latencies.append(took)
                        patched[0] += "patch" in answer["response"]
                    else:
                        failures.append(f"HTTP {response.status}: {data[:200]!r}")
            except Exception as e:  # noqa: BLE001 - every failure counts, whatever its kind
                with lock:
                    failures.append(f"{type(e).__name__}: {e}")
                conn = None

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    latencies.sort()

    def pct(p):
        return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000, 2) if latencies else None

    print(json.dumps({
        "requests": total, "ok": len(latencies), "failed": len(failures), "patched": patched[0],
        "late_sends": late[0], "p50_ms": pct(0.50), "p99_ms": pct(0.99), "max_ms": pct(1.0),
        "first_failures": failures[:5],
    }))


if __name__ == "__main__":
    main()
