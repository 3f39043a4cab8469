"""A random mix of Pods for the SidecarSets of tests/e2e/migration/sidecarsets.yaml (tests/e2e/migration.sh).

    pod_mix.py SEED COUNT > pods.json

Prints a v1 List of COUNT Pods (generateName "mix-"), the same for the same SEED: spread over the
namespaces mig-prod (env=prod), mig-dev (env=dev) and mig-batch; labels that select none, one, two or
three of the SidecarSets; one or two containers, with or without the env var a SidecarSet transfers,
a volume of the Pod's own (shared into sidecars by shareVolumePolicy) and an init container.
"""

import json
import random
import sys


def pod(rng: random.Random) -> dict:
    labels = {}
    app = rng.choice(["web", "api", "batch", None])
    if app:
        labels["app"] = app
    if rng.random() < 0.5:
        labels["mesh"] = "on"
    main = {"name": "app", "image": rng.choice(["nginx:1.25", "nginx:1.27", "redis:7.2"])}
    if rng.random() < 0.4:
        main["env"] = [{"name": "POD_ROLE", "value": rng.choice(["frontend", "backend"])}]
    spec = {"containers": [main]}
    if rng.random() < 0.3:
        spec["containers"].append({"name": "helper", "image": "busybox:1.36", "command": ["sleep", "999999"]})
    if rng.random() < 0.4:
        spec["volumes"] = [{"name": "data", "emptyDir": {}}]
        main["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    if rng.random() < 0.2:
        spec["initContainers"] = [{"name": "setup", "image": "busybox:1.36", "command": ["true"]}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": "mix-",
            "namespace": rng.choice(["mig-prod", "mig-dev", "mig-batch"]),
            "labels": labels,
        },
        "spec": spec,
    }


def main() -> None:
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [pod(rng) for _ in range(count)]}))


if __name__ == "__main__":
    main()
