#!/usr/bin/env python3
"""Concurrent Pod creations (tests/e2e/pod_budgets.sh): COUNT Pods at once, all released together.

    create_storm.py URL TOKEN CA-FILE NAMESPACE POD-JSON COUNT OUT-JSON

POD-JSON is the Pod to create (with generateName); each is sent on its own connection by its own
thread. OUT-JSON gets one record per create: the HTTP status, the stored Pod's name and annotations,
or the API server's message.
"""

import http.client
import json
import ssl
import sys
import threading
import urllib.parse


def main() -> None:
    url, token, ca, namespace, pod_file, count, out = sys.argv[1:8]
    parsed = urllib.parse.urlparse(url)
    context = ssl.create_default_context(cafile=ca)
    body = open(pod_file).read()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    start = threading.Barrier(int(count))
    records = []
    lock = threading.Lock()

    def create() -> None:
        record = {}
        try:
            conn = http.client.HTTPSConnection(parsed.hostname, parsed.port, context=context, timeout=60)
            conn.connect()
            start.wait()
            conn.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=body, headers=headers)
            response = conn.getresponse()
            data = json.loads(response.read() or b"{}")
            record["status"] = response.status
            if response.status == 201:
                record["name"] = data["metadata"]["name"]
                record["annotations"] = data["metadata"].get("annotations", {})
            else:
                record["message"] = data.get("message", "")
        except (OSError, http.client.HTTPException, ValueError, threading.BrokenBarrierError) as err:
            record["status"] = 0
            record["message"] = f"{type(err).__name__}: {err}"
        with lock:
            records.append(record)

    threads = [threading.Thread(target=create) for _ in range(int(count))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(out, "w") as f:
        json.dump(records, f)


if __name__ == "__main__":
    main()
