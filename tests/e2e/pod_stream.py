"""Create Pods through the API server at a steady pace until a stop file appears (tests/e2e/migration.sh).

    pod_stream.py URL TOKEN CA-FILE NAMESPACE LABELS-JSON OUT-JSONL STOP-FILE [INTERVAL-SECONDS]

One Pod (generateName "stream-", the given labels, one app container) every INTERVAL seconds (default
0.25) over one kept-alive connection; one JSON line per create in OUT-JSONL: the time, the HTTP status,
the stored Pod's name and container names, or the API server's message. A create that fails is recorded,
never retried: the suite counts failures and Pods without their sidecars.
"""

import http.client
import json
import os
import ssl
import sys
import time
import urllib.parse


def main() -> None:
    url, token, ca, namespace, labels, out, stop = sys.argv[1:8]
    interval = float(sys.argv[8]) if len(sys.argv) > 8 else 0.25
    parsed = urllib.parse.urlparse(url)
    context = ssl.create_default_context(cafile=ca)
    body = json.dumps({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "stream-", "labels": json.loads(labels)},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]},
    })
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    path = f"/api/v1/namespaces/{namespace}/pods"
    conn = None
    with open(out, "a", buffering=1) as log:
        while not os.path.exists(stop):
            started = time.time()
            record = {"t": round(started, 3)}
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection(parsed.hostname, parsed.port, context=context, timeout=30)
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                data = json.loads(response.read() or b"{}")
                record["status"] = response.status
                if response.status == 201:
                    record["name"] = data["metadata"]["name"]
                    record["containers"] = [c["name"] for c in data["spec"]["containers"]]
                    record["initContainers"] = [c["name"] for c in data["spec"].get("initContainers", [])]
                else:
                    record["message"] = data.get("message", "")
            except (OSError, http.client.HTTPException, ValueError) as err:
                record["status"] = 0
                record["message"] = f"{type(err).__name__}: {err}"
                conn = None
            log.write(json.dumps(record) + "\n")
            time.sleep(max(0.0, interval - (time.time() - started)))


if __name__ == "__main__":
    main()
