#!/usr/bin/env python3
"""The API server's view of one webhook's latency between metric snapshots (standard library only).

Reads kube-apiserver's `apiserver_admission_webhook_admission_duration_seconds` histogram for one
webhook name (operation CREATE, type admit or with --validating validating, not rejected) from pairs of /metrics snapshots taken
before and after a batch of requests, adds up the differences, and prints one JSON object: count,
mean (from _sum/_count), p50/p90/p99 interpolated inside the buckets the way Prometheus'
histogram_quantile does, and the bucket counts themselves.

Usage: webhook_latency.py [--validating] WEBHOOK BEFORE AFTER [BEFORE AFTER ...]
"""

import json
import re
import sys

METRIC = "apiserver_admission_webhook_admission_duration_seconds"
LINE = re.compile(r'^(?P<name>[a-z_]+)\{(?P<labels>[^}]*)\} (?P<value>\S+)$')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def histogram(path, webhook, kind):
    """{le: cumulative count}, sum, count for the webhook in one snapshot."""
    buckets, total, count = {}, 0.0, 0.0
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m or not m["name"].startswith(METRIC):
                continue
            labels = dict(LABEL.findall(m["labels"]))
            if (labels.get("name"), labels.get("operation"), labels.get("type"), labels.get("rejected")) != (
                webhook, "CREATE", kind, "false"):
                continue
            value = float(m["value"])
            suffix = m["name"][len(METRIC):]
            if suffix == "_bucket":
                buckets[float(labels["le"])] = value
            elif suffix == "_sum":
                total = value
            elif suffix == "_count":
                count = value
    return buckets, total, count


def quantile(q, bounds, cumulative):
    """Prometheus' histogram_quantile: linear inside the bucket that holds rank q * count."""
    count = cumulative[-1]
    if count == 0:
        return None
    rank = q * count
    lower, below = 0.0, 0.0
    for bound, cum in zip(bounds, cumulative):
        if cum >= rank:
            if bound == float("inf"):
                return lower  # above the highest finite bound: Prometheus answers that bound
            return lower + (bound - lower) * (rank - below) / max(cum - below, 1e-12)
        lower, below = bound, cum
    return lower


def main(argv):
    kind = "admit"
    if argv[1:2] == ["--validating"]:
        kind, argv = "validating", argv[1:]
    if len(argv) < 4 or len(argv) % 2:
        sys.exit(__doc__)
    webhook, files = argv[1], argv[2:]
    diff, total, count = {}, 0.0, 0.0
    for before, after in zip(files[::2], files[1::2]):
        b0, s0, c0 = histogram(before, webhook, kind)
        b1, s1, c1 = histogram(after, webhook, kind)
        for le, v in b1.items():
            diff[le] = diff.get(le, 0.0) + v - b0.get(le, 0.0)
        total += s1 - s0
        count += c1 - c0
    bounds = sorted(diff)
    cumulative = [diff[b] for b in bounds]
    ms = lambda s: None if s is None else round(s * 1000, 2)  # noqa: E731
    print(json.dumps({
        "webhook": webhook,
        "count": int(count),
        "mean_ms": ms(total / count) if count else None,
        "p50_ms": ms(quantile(0.5, bounds, cumulative)) if bounds else None,
        "p90_ms": ms(quantile(0.9, bounds, cumulative)) if bounds else None,
        "p99_ms": ms(quantile(0.99, bounds, cumulative)) if bounds else None,
        "buckets": {("+Inf" if b == float("inf") else f"{b * 1000:g}ms"): int(c) for b, c in zip(bounds, cumulative)},
    }))


if __name__ == "__main__":
    main(sys.argv)
