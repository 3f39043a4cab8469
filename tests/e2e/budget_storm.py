#!/usr/bin/env python3
"""Concurrent evictions and deletes of the Pods of one PodUnavailableBudget (tests/e2e/pod_budgets.sh).

    budget_storm.py URL TOKEN CA-FILE NAMESPACE PODS-FILE OUT-JSON

PODS-FILE holds one Pod name per line. For each Pod, one eviction (policy/v1, POST .../eviction)
and one DELETE, all sent at once (a thread each, released together). OUT-JSON gets one record per
request: the Pod, the verb, the HTTP status and the API server's message.
"""

import http.client
import json
import ssl
import sys
import threading
import urllib.parse


def main() -> None:
    url, token, ca, namespace, pods_file, out = sys.argv[1:7]
    parsed = urllib.parse.urlparse(url)
    context = ssl.create_default_context(cafile=ca)
    pods = [line.strip() for line in open(pods_file) if line.strip()]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    start = threading.Barrier(2 * len(pods))
    records = []
    lock = threading.Lock()

    def call(pod: str, verb: str) -> None:
        base = f"/api/v1/namespaces/{namespace}/pods/{pod}"
        if verb == "evict":
            method, path = "POST", base + "/eviction"
            body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                               "metadata": {"name": pod, "namespace": namespace}})
        else:
            method, path, body = "DELETE", base, None
        record = {"pod": pod, "verb": verb}
        try:
            conn = http.client.HTTPSConnection(parsed.hostname, parsed.port, context=context, timeout=60)
            conn.connect()
            start.wait()
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = json.loads(response.read() or b"{}")
            record["status"] = response.status
            record["message"] = data.get("message", "") if data.get("kind") == "Status" else ""
        except (OSError, http.client.HTTPException, ValueError, threading.BrokenBarrierError) as err:
            record["status"] = 0
            record["message"] = f"{type(err).__name__}: {err}"
        with lock:
            records.append(record)

    threads = [threading.Thread(target=call, args=(pod, verb)) for pod in pods for verb in ("evict", "delete")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(out, "w") as f:
        json.dump(records, f)


if __name__ == "__main__":
    main()
