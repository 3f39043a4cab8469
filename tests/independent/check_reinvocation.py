#!/usr/bin/env python3
"""Re-invocation and cross-library check of /mutate-pod patches.

For every recorded Pod CREATE in tests/fixtures/recorded, plus variants that make our webhooks
really patch (the DaemonSet-style `kruise-admission.dev/target-node` annotation; the labels the
SidecarSets in examples/cluster select), run `kruise-admission dry-run --output json` and check:

1. the patch applied with evanphx/json-patch (what kube-apiserver uses; the Go checker in
   tests/independent/evanphx) gives exactly the reported object;
2. the patch applied with python `jsonpatch` (strict RFC 6902) gives the same object;
3. the reported object, fed back as a new CREATE (what the apiserver does with
   reinvocationPolicy: IfNeeded, or after another webhook changed something else), gets no patch;
4. the patched pod is no less valid than the input under `kubernetes-validate --strict`
   (the comparison of check_patched_pods.py: a patch may not add a validation error).

Prints one line per case and `N passed, M failed (K patched)`; exits 1 on any failure.
"""

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonpatch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_patched_pods import for_validation, validation_errors  # noqa: E402

NOW = "2024-05-01T12:00:00Z"
REPO = Path(__file__).resolve().parents[2]
# Labels selected by the SidecarSets in examples/cluster/sidecarsets (and the annotation of the
# DaemonSet-style stamp); each variant turns on one of them.
VARIANTS = {
    "target-node": ("annotations", {"kruise-admission.dev/target-node": "reinvocation-node"}),
    "mesh": ("labels", {"mesh.example.com/inject": "true"}),
    "logging": ("labels", {"logging": "fluent-bit"}),
    "agent": ("labels", {"mesh.example.com/agent": "hot"}),
    "token": ("labels", {"auth.example.com/token": "refresh"}),
    "all": ("labels", {"mesh.example.com/inject": "true", "logging": "fluent-bit", "auth.example.com/token": "refresh"}),
}


def fixtures_dir() -> Path:
    """The committed fixtures (tests/fixtures, as tests/common/mod.rs::fixtures_dir())."""
    return REPO / "tests/fixtures"


def is_pod_create(review) -> bool:
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict) or request.get("subResource"):
        return False
    kind = (request.get("kind") or {}).get("kind")
    return kind == "Pod" and str(request.get("operation", "")).upper() == "CREATE" and isinstance(request.get("object"), dict)


def dry_run(binary, cluster_dir, files):
    command = [binary, "dry-run", "--output", "json", "--now", NOW, "--cluster-dir", cluster_dir, *files]
    run = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if run.returncode not in (0, 1):
        sys.exit(f"dry-run failed with exit {run.returncode}:\n{run.stderr}")
    return {entry["source"]: entry for entry in map(json.loads, run.stdout.splitlines())}


def evanphx(checker, pairs):
    """Apply each (object, patch) with the Go checker; a list of {"object"} or {"error"}."""
    text = "".join(json.dumps({"object": o, "patch": p}) + "\n" for o, p in pairs)
    run = subprocess.run([checker], input=text, capture_output=True, text=True, check=True)
    return [json.loads(line) for line in run.stdout.splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(REPO / "target/debug/kruise-admission"))
    parser.add_argument("--checker", required=True, help="the built tests/independent/evanphx program")
    parser.add_argument("--cluster-dir", default=str(REPO / "examples/cluster"))
    args = parser.parse_args()
    recorded = fixtures_dir() / "recorded"

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases = []  # (label, path, review)
        for path in sorted(recorded.iterdir()):
            if path.suffix not in (".json", ".yaml", ".yml"):
                continue
            review = yaml.safe_load(path.read_text()) if path.suffix != ".json" else json.loads(path.read_text())
            if not is_pod_create(review):
                continue
            cases.append((path.name, str(path), review))
            for name, (field, values) in VARIANTS.items():
                variant = copy.deepcopy(review)
                metadata = variant["request"]["object"].setdefault("metadata", {})
                metadata[field] = {**(metadata.get(field) or {}), **values}
                if name in ("mesh", "all"):
                    # envoy-proxy is limited to the `shop` namespace.
                    metadata["namespace"] = variant["request"]["namespace"] = "shop"
                variant_path = tmp / f"{name}-{path.stem}.json"
                variant_path.write_text(json.dumps(variant))
                cases.append((f"{path.name} +{name}", str(variant_path), variant))
        first = dry_run(args.binary, args.cluster_dir, [source for _, source, _ in cases])

        # Second pass: each reported object as a new CREATE.
        again = {}
        for label, source, review in cases:
            entry = first.get(source)
            if entry and entry["allowed"]:
                fed_back = copy.deepcopy(review)
                fed_back["request"]["object"] = entry["object"]
                fed_back["request"]["uid"] = "reinvoked-" + str(review["request"].get("uid", ""))
                path = tmp / f"again-{len(again)}.json"
                path.write_text(json.dumps(fed_back))
                again[source] = str(path)
        second = dry_run(args.binary, args.cluster_dir, list(again.values()))

        patched_cases = [(source, first[source]) for _, source, _ in cases if source in first and first[source]["allowed"]]
        go_results = dict(
            zip(
                [source for source, _ in patched_cases],
                evanphx(args.checker, [(next(r for _, s, r in cases if s == source)["request"]["object"], e["patch"]) for source, e in patched_cases]),
            )
        )

    passed = failed = patched = 0
    for label, source, review in cases:
        problems = []
        entry = first.get(source)
        original = review["request"]["object"]
        if entry is None:
            problems.append("dry-run printed no line")
        elif not entry["allowed"]:
            note = f"denied {entry['status']['code']}: {entry['status']['message']}"
        else:
            patched += bool(entry["patch"])
            go = go_results[source]
            if "error" in go:
                problems.append(f"evanphx refused the patch: {go['error']}")
            elif go["object"] != entry["object"]:
                problems.append("evanphx result differs from the reported object")
            try:
                py = jsonpatch.apply_patch(original, entry["patch"], in_place=False)
                if py != entry["object"]:
                    problems.append("python jsonpatch result differs from the reported object")
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                problems.append(f"python jsonpatch refused the patch: {e}")
            request = review["request"]
            added = sorted(validation_errors(for_validation(entry["object"], request)) - validation_errors(for_validation(original, request)))
            if added:
                problems.append("patch adds validation errors: " + "; ".join(f"{p}: {m}" for p, m in added[:3]))
            reinvoked = second.get(again[source])
            if reinvoked is None:
                problems.append("re-invocation printed no line")
            elif not reinvoked["allowed"] or reinvoked["patch"]:
                problems.append(f"re-invocation was not a no-op: allowed={reinvoked['allowed']} patch={json.dumps(reinvoked['patch'])[:300]}")
            note = f"{len(entry['patch'])} ops, evanphx == jsonpatch == reported, no validation error added, re-invocation no-op"
        if problems:
            failed += 1
            print(f"FAIL {label}: " + " | ".join(problems))
        else:
            passed += 1
            print(f"ok   {label}: {note}")
    print(f"{passed} passed, {failed} failed ({patched} patched)")
    if patched == 0:
        print("no case was patched: the check proved nothing", file=sys.stderr)
        return 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
