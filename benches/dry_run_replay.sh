#!/usr/bin/env bash
# Replay N recorded pod creations through `kruise-admission dry-run --output summary` and print
# the rate. The pods are a real recorded pod CREATE (tests/fixtures/recorded/) with a fresh uid
# and name each; every other one carries the label the log-agent SidecarSet of
# tests/golden/cluster selects, so half are injected and half pass through.
#
#   benches/dry_run_replay.sh                 # 100,000 reviews as JSON lines, then as an audit log
#   N=20000 FORMAT=audit benches/dry_run_replay.sh
#   BIN=path/to/kruise-admission benches/dry_run_replay.sh   # another build, e.g. a debug one
#
# Uses the release binary, which cargo builds (or finds up to date) wherever its target directory
# is. The number depends on the machine and its load.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. .ci/cargo-paths.sh
n=${N:-100000}
formats=${FORMAT:-reviews audit}
recorded=$root/tests/fixtures/recorded/kube-rs-pod-create-gke.json
if [ -n "${BIN:-}" ]; then
  bin=$BIN
else
  echo "building the release binary (cargo build --release)" >&2
  bin=$(cargo_exe kruise-admission --release --bin kruise-admission)
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for format in $formats; do
  input=$tmp/$format.jsonl
  echo "$format: writing $n pod CREATEs, then replaying them through $bin dry-run" >&2
  python3 - "$recorded" "$n" "$format" >"$input" <<'PY'
import json, sys, uuid
recorded, n, fmt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
review = json.load(open(recorded))
request = review["request"]
pod = request["object"]
out = sys.stdout
for i in range(n):
    uid = str(uuid.UUID(int=i))
    pod["metadata"]["name"] = f"replay-{i}"
    labels = pod["metadata"].setdefault("labels", {})
    if i % 2 == 0:
        labels["logging"] = "fluent-bit"
    else:
        labels.pop("logging", None)
    if fmt == "reviews":
        request["uid"] = uid
        request["name"] = pod["metadata"]["name"]
        out.write(json.dumps(review, separators=(",", ":")) + "\n")
    else:
        event = {
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse", "auditID": uid,
            "stage": "ResponseComplete", "requestURI": f"/api/v1/namespaces/{request.get('namespace', 'default')}/pods",
            "verb": "create", "user": request.get("userInfo", {}), "sourceIPs": ["10.0.0.12"],
            "objectRef": {"resource": "pods", "namespace": request.get("namespace", "default"), "name": pod["metadata"]["name"], "apiVersion": "v1"},
            "responseStatus": {"metadata": {}, "code": 201},
            "requestObject": pod, "responseObject": pod,
            "requestReceivedTimestamp": "2024-05-01T10:00:00.100000Z", "stageTimestamp": "2024-05-01T10:00:00.143221Z",
        }
        out.write(json.dumps(event, separators=(",", ":")) + "\n")
PY
  bytes=$(wc -c <"$input")
  start=$(date +%s.%N)
  # The machine is shared: report the CPU time the run used next to the wall-clock time.
  /usr/bin/time -f "%U %S" -o "$tmp/cpu" \
    "$bin" dry-run --cluster-dir "$root/tests/golden/cluster" --now 2024-05-01T12:00:00Z --output summary "$input" >"$tmp/summary.txt" || status=$?
  end=$(date +%s.%N)
  totals=$(grep -E '^[0-9]+ inputs:' "$tmp/summary.txt")
  case "$totals" in
    "$n inputs: $n allowed, 0 denied"*) ;;
    *) echo "unexpected totals for $format: $totals (exit ${status:-0})" >&2; exit 1 ;;
  esac
  python3 -c "import sys; n, b, s, e = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]); t = e - s
cpu = sum(float(x) for x in open(sys.argv[6]).read().split())
print(f'{sys.argv[5]:8} {n} pod CREATEs ({b / 1e6:.0f} MB): {t:.2f} s wall, {n / t:,.0f} reviews/s; {cpu:.2f} s CPU, {n / cpu:,.0f} reviews per CPU-second')" \
    "$n" "$bytes" "$start" "$end" "$format" "$tmp/cpu"
done
