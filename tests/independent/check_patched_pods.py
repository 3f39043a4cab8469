#!/usr/bin/env python3
"""Independent check of /mutate-pod patches, with tools that share no code with ours.

For every recorded Pod CREATE in tests/fixtures/recorded, and for a variant of each with the
`kruise-admission.dev/target-node` annotation added (so the DaemonSet-style stamp really patches
it), run `kruise-admission dry-run --output json` against examples/cluster and check that:

1. the reported patch applies to the input object with python `jsonpatch` (strict RFC 6902) and
   gives exactly the reported `object`;
2. the patched pod is no less valid than the input under `kubernetes-validate --strict` (Kubernetes
   1.37 schemas). A few recorded objects are invalid as captured, so validation errors of the input
   are allowed to remain; the patch must not add any. Pods created through generateName have no
   name yet at admission time; both sides get the same placeholder name before validating;
3. a denial happens only for an input the API server itself would reject (it fails validation);
4. every allowed targeted variant is actually patched.

Prints one line per case and a summary `N passed, M failed`; exits 1 on any failure.
Requires: pip install kubernetes-validate==1.37.0 jsonpatch==1.48
"""

import argparse
import copy
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonpatch
import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource

K8S_VERSION = "1.37"
NOW = "2024-05-01T12:00:00Z"
TARGET_NODE_ANNOTATION = "kruise-admission.dev/target-node"
TARGET_NODE = "independent-check-node"
PLACEHOLDER_NAME = "independent-check-placeholder"

REPO = Path(__file__).resolve().parents[2]


def fixtures_dir() -> Path:
    """The committed fixtures (tests/fixtures, as tests/common/mod.rs::fixtures_dir())."""
    return REPO / "tests/fixtures"


def load_review(path: Path):
    with open(path) as f:
        return yaml.safe_load(f) if path.suffix in (".yaml", ".yml") else json.load(f)


def is_pod_create(review) -> bool:
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict) or request.get("subResource"):
        return False
    kind = (request.get("kind") or {}).get("kind")
    resource = (request.get("resource") or {}).get("resource")
    operation = request.get("operation")
    return (kind == "Pod" or resource == "pods") and isinstance(operation, str) and operation.upper() == "CREATE"


def for_validation(obj, request):
    """The object as the API server would validate it: apiVersion and kind come from the request
    when the captured object omits them, and a generateName pod gets a placeholder name."""
    obj = copy.deepcopy(obj)
    if not isinstance(obj, dict):
        return obj
    kind = request.get("kind") or {}
    if "apiVersion" not in obj and kind.get("version"):
        group = kind.get("group") or ""
        obj["apiVersion"] = f"{group}/{kind['version']}" if group else kind["version"]
    if "kind" not in obj and kind.get("kind"):
        obj["kind"] = kind["kind"]
    metadata = obj.setdefault("metadata", {}) if isinstance(obj.get("metadata", {}), dict) else None
    if metadata is not None and not metadata.get("name"):
        metadata["name"] = (metadata.get("generateName") or "") + PLACEHOLDER_NAME
    return obj


def validation_errors(obj):
    """Every strict-schema error as (path, message), so that before and after can be compared as
    sets. kubernetes_validate.validate(strict=True), what the CLI runs, stops at the first error;
    when it reports one, the same schema files are walked with iter_errors for the full list."""
    try:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        return set()
    except kubernetes_validate.ValidationError:
        pass
    except (kubernetes_validate.SchemaNotFoundError, KeyError, TypeError) as e:
        return {("", f"{type(e).__name__}: {getattr(e, 'message', e)}")}
    # The schema file kubernetes_validate picks: <kind>-<group prefix>-<version>.json.
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", obj["apiVersion"])
    version = [v for v in kv_utils.all_versions() if kv_utils.major_minor(v) <= K8S_VERSION][-1]
    schema_dir = f"kubernetes-json-schema/v{version}-local-strict"
    schema = kv_utils.schema_contents(f"{schema_dir}/{obj['kind'].lower()}-{group_version}.json", K8S_VERSION)
    definitions = kv_utils.schema_contents(f"{schema_dir}/_definitions.json", K8S_VERSION)
    registry = Resource.from_contents(definitions) @ (Resource.from_contents(schema) @ Registry())
    validator = jsonschema.validators.Draft202012Validator(schema, registry=registry)
    return {("/".join(str(p) for p in e.absolute_path), e.message) for e in validator.iter_errors(obj)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default=str(REPO / "target/debug/kruise-admission"))
    parser.add_argument("--cluster-dir", default=str(REPO / "examples/cluster"))
    args = parser.parse_args()
    recorded = fixtures_dir() / "recorded"

    cases = []  # (label, input path, review, targeted)
    with tempfile.TemporaryDirectory() as tmp:
        for path in sorted(recorded.iterdir()):
            if path.suffix not in (".json", ".yaml", ".yml"):
                continue
            review = load_review(path)
            if not is_pod_create(review):
                continue
            cases.append((path.name, str(path), review, False))
            variant = copy.deepcopy(review)
            obj = variant["request"].get("object")
            if isinstance(obj, dict) and isinstance(obj.get("metadata", {}), dict):
                obj.setdefault("metadata", {})
                annotations = obj["metadata"].get("annotations") or {}
                annotations[TARGET_NODE_ANNOTATION] = TARGET_NODE
                obj["metadata"]["annotations"] = annotations
                variant_path = Path(tmp) / f"targeted-{path.stem}.json"
                variant_path.write_text(json.dumps(variant))
                cases.append((f"{path.name} +target-node", str(variant_path), variant, True))
        if not cases:
            print(f"no recorded Pod CREATE found under {recorded}", file=sys.stderr)
            return 1
        command = [args.binary, "dry-run", "--output", "json", "--now", NOW, "--cluster-dir", args.cluster_dir]
        command += [source for _, source, _, _ in cases]
        run = subprocess.run(command, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if run.returncode not in (0, 1):
            print(f"dry-run failed with exit {run.returncode}:\n{run.stderr}", file=sys.stderr)
            return 1
        lines = {}
        for line in run.stdout.splitlines():
            entry = json.loads(line)
            lines[entry["source"]] = entry

    passed = failed = 0
    for label, source, review, targeted in cases:
        problems = []
        note = ""
        request = review["request"]
        original = request.get("object")
        entry = lines.get(source)
        before = validation_errors(for_validation(original, request))
        if entry is None:
            problems.append("dry-run printed no line for it")
        elif not entry["allowed"]:
            status = entry["status"]
            if not before:
                problems.append(f"a valid pod was denied: {status['code']} {status['message']}")
            note = f"denied an input the API server rejects too ({status['code']} {status['message']})"
        else:
            try:
                patched = jsonpatch.apply_patch(original, entry["patch"], in_place=False)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as e:
                patched = None
                problems.append(f"patch does not apply (RFC 6902): {e}")
            if patched is not None:
                if patched != entry["object"]:
                    problems.append("patched input differs from the reported object")
                after = validation_errors(for_validation(patched, request))
                new = sorted(after - before)
                if new:
                    problems.append("patch adds validation errors: " + "; ".join(f"{p}: {m}" for p, m in new[:3]))
                note = f"{len(entry['patch'])} ops" + (f", {len(before)} validation errors as captured, none added" if before else ", valid")
            if targeted and not entry["patch"]:
                problems.append("the target-node annotation produced no patch")
        if problems:
            failed += 1
            print(f"FAIL {label}: " + " | ".join(problems))
        else:
            passed += 1
            print(f"ok   {label}: {note}")
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
