#!/usr/bin/env python3
"""Independent checks of the SidecarSet conformance outputs.

`cargo test --test integration sidecarset_conformance::` writes, per allowed case, the original pod, the JSON
patch and the mutated pod to target/sidecarset-conformance/<case>.json. This script:
  1. applies each patch to the original pod with the Python `jsonpatch` library (a strict RFC 6902
     implementation, independent of ours) and requires the mutated pod;
  2. validates each mutated pod with `kubernetes-validate --strict` (real Kubernetes schemas).

Usage: pip install jsonpatch==1.48 kubernetes-validate==1.37.0
       python3 tests/sidecarset/check_external.py [target/sidecarset-conformance]
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

import jsonpatch


def main() -> int:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "target", "sidecarset-conformance")
    files = sorted(glob.glob(os.path.join(out_dir, "*.json")))
    if not files:
        print(f"no outputs in {out_dir}; run cargo test --test integration sidecarset_conformance:: first", file=sys.stderr)
        return 2
    failures = 0
    for path in files:
        with open(path) as f:
            record = json.load(f)
        case = record["case"]
        applied = jsonpatch.apply_patch(record["pod"], record["patch"])
        if applied != record["mutated"]:
            print(f"FAIL {case}: jsonpatch result differs from the mutated pod")
            failures += 1
            continue
        pod = json.loads(json.dumps(applied))
        # Pods created through generateName have no name yet at admission time.
        pod.setdefault("metadata", {}).setdefault("name", "placeholder-name")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
            json.dump(pod, tmp)
        # Cases that carry unknown fields on purpose are validated without --strict.
        strict = ["--strict"] if record.get("strict", True) else []
        result = subprocess.run(["kubernetes-validate", *strict, tmp.name], capture_output=True, text=True)
        os.unlink(tmp.name)
        if result.returncode != 0:
            print(f"FAIL {case}: kubernetes-validate --strict\n{result.stdout}{result.stderr}")
            failures += 1
        else:
            print(f"ok   {case} ({len(record['patch'])} patch operations)")
    print(f"{len(files) - failures}/{len(files)} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
