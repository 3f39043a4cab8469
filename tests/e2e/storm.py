"""Requests to the API server all released at once (tests/e2e/budget_storm.py, create_storm.py).

Each request gets its own thread and its own TLS connection, opened before a barrier that releases
them together, so they reach the API server (and the webhooks behind it) as close to the same moment
as a machine allows.
"""

import http.client
import json
import ssl
import threading
import urllib.parse


def at_once(url, token, ca, requests):
    """Send every (method, path, body, record) of `requests` at once; return one record per
    request, each the given `record` with `status` (0 when no answer came) and either the whole
    answer as `answer` (a 2xx) or the API server's `message`."""
    parsed = urllib.parse.urlparse(url)
    context = ssl.create_default_context(cafile=ca)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    start = threading.Barrier(len(requests))
    records = []
    lock = threading.Lock()

    def send(method, path, body, record):
        try:
            conn = http.client.HTTPSConnection(parsed.hostname, parsed.port, context=context, timeout=60)
            conn.connect()
            start.wait()
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = json.loads(response.read() or b"{}")
            record["status"] = response.status
            if 200 <= response.status < 300:
                record["answer"] = data
            else:
                record["message"] = data.get("message", "") if data.get("kind") == "Status" else ""
        except (OSError, http.client.HTTPException, ValueError, threading.BrokenBarrierError) as err:
            record["status"] = 0
            record["message"] = f"{type(err).__name__}: {err}"
        with lock:
            records.append(record)

    threads = [threading.Thread(target=send, args=request) for request in requests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return records
