#!/usr/bin/env python3
"""Concurrent evictions and deletes of the Pods of one PodUnavailableBudget (tests/e2e/pod_budgets.sh).

    budget_storm.py URL TOKEN CA-FILE NAMESPACE PODS-FILE OUT-JSON

PODS-FILE holds one Pod name per line. For each Pod, one eviction (policy/v1, POST .../eviction)
and one DELETE, all sent at once (a thread each, released together). OUT-JSON gets one record per
request: the Pod, the verb, the HTTP status and the API server's message.
"""

import json
import sys

from storm import at_once


def main() -> None:
    url, token, ca, namespace, pods_file, out = sys.argv[1:7]
    pods = [line.strip() for line in open(pods_file) if line.strip()]
    requests = []
    for pod in pods:
        base = f"/api/v1/namespaces/{namespace}/pods/{pod}"
        eviction = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                               "metadata": {"name": pod, "namespace": namespace}})
        requests.append(("POST", base + "/eviction", eviction, {"pod": pod, "verb": "evict"}))
        requests.append(("DELETE", base, None, {"pod": pod, "verb": "delete"}))
    records = at_once(url, token, ca, requests)
    for record in records:
        record.pop("answer", None)
    with open(out, "w") as f:
        json.dump(records, f)


if __name__ == "__main__":
    main()
