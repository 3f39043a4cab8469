#!/usr/bin/env python3
"""Concurrent Pod creations (tests/e2e/pod_budgets.sh): COUNT Pods at once, all released together.

    create_storm.py URL TOKEN CA-FILE NAMESPACE POD-JSON COUNT OUT-JSON

POD-JSON is the Pod to create (with generateName); each is sent on its own connection by its own
thread. OUT-JSON gets one record per create: the HTTP status, the stored Pod's name and annotations,
or the API server's message.
"""

import json
import sys

from storm import at_once


def main() -> None:
    url, token, ca, namespace, pod_file, count, out = sys.argv[1:8]
    body = open(pod_file).read()
    path = f"/api/v1/namespaces/{namespace}/pods"
    records = at_once(url, token, ca, [("POST", path, body, {}) for _ in range(int(count))])
    for record in records:
        created = record.pop("answer", None)
        if created is not None:
            record["name"] = created["metadata"]["name"]
            record["annotations"] = created["metadata"].get("annotations", {})
    with open(out, "w") as f:
        json.dump(records, f)


if __name__ == "__main__":
    main()
