#!/usr/bin/env bash
# The release image without a Docker engine, then run as a user would.
#
# Builds a static binary (the target and RUSTFLAGS of image.env), puts it on `scratch` with buildah
# in the layout of image.env (the Dockerfile makes the same image; tests/hardening.rs checks that
# both say the same) and leaves, under cargo's target directory:
#   image/oci                           an OCI layout, tag = the version in Cargo.toml
#   image/kruise-admission-VERSION.tar  the same image as a docker-archive, for `kind load image-archive`
# Then runs the image: `--version`, and `serve` with its default arguments answering a recorded
# review over TLS on 127.0.0.1. With podman when podman can run containers here; where it cannot
# (sandboxes whose runtime may not set rlimits), umoci unpacks the image and the rootfs runs as its
# config.json says (user, entrypoint and arguments, working directory), with the root read-only, the
# certificate folder a writable bind mount (the Deployment's emptyDir) and the cluster folder a
# read-only one (its ConfigMap), and no /dev or /proc: what the binary needs must be in the image.
#
# Needs root (buildah's storage, umoci keeping file owners, mounts). Installs buildah, umoci,
# skopeo and podman from Debian's packages when missing. Prints the image's size and the time each
# part took. Every wait is bounded, and the server is stopped on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. .ci/cargo-paths.sh
. ./image.env

started=$SECONDS
say() { printf 'image: %s\n' "$*"; }
fail() { printf 'image: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root: buildah keeps its storage as root, umoci keeps the files' owners, the run mounts"
missing=()
for tool in buildah umoci skopeo podman; do
    command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
    command -v apt-get >/dev/null 2>&1 || fail "needs ${missing[*]} (not on PATH, and no apt-get to install them)"
    say "installing ${missing[*]} (apt-get)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

read -r version license < <(cargo metadata --format-version 1 --no-deps | python3 -c '
import json, sys
package = next(p for p in json.load(sys.stdin)["packages"] if p["name"] == "kruise-admission")
print(package["version"], package["license"])')
revision="$(git rev-parse HEAD 2>/dev/null)" || fail "not a git checkout: the revision label is the commit (git rev-parse HEAD)"
# The commit's time for every timestamp in the image: the same commit gives the same layers.
commit_time="$(git log -1 --format=%ct)"
image_dir="$(cargo_target_dir)/image"
layout="$image_dir/oci"
archive="$image_dir/kruise-admission-$version.tar"

say "building the static binary (cargo build --release --target $IMAGE_TARGET, RUSTFLAGS=$IMAGE_RUSTFLAGS)"
phase=$SECONDS
binary="$(RUSTFLAGS="$IMAGE_RUSTFLAGS" cargo_exe kruise-admission --release --locked --target "$IMAGE_TARGET" --bin kruise-admission)"
build_seconds=$((SECONDS - phase))
# glibc's ldd says so for static-pie too; a dynamic binary would only fail later, in the empty rootfs.
ldd "$binary" 2>&1 | grep -q 'statically linked' || fail "$binary is not statically linked: $(ldd "$binary" 2>&1 | head -3)"

work="$(mktemp -d)"
server_pid=""
cleanup() {
    if [ -n "$server_pid" ]; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT
buildah=(buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs)

say "assembling the image with buildah (layout: image.env)"
phase=$SECONDS
# The same two trees the Dockerfile's build stage makes and its final stage copies.
install -D -m 0755 "$binary" "$work/rootfs$IMAGE_BINARY"
install -d -m 0755 "$work/rootfs$IMAGE_CLUSTER_DIR" "$work/certs"
container="$("${buildah[@]}" from scratch)"
"${buildah[@]}" copy --quiet "$container" "$work/rootfs/" / >/dev/null
"${buildah[@]}" copy --quiet --chown "$IMAGE_USER" "$container" "$work/certs/" "$IMAGE_CERT_DIR/" >/dev/null
read -ra cmd <<<"$IMAGE_CMD"
ports=()
for port in $IMAGE_PORTS; do ports+=(--port "$port/tcp"); done # as EXPOSE records it
"${buildah[@]}" config --os linux --arch amd64 --created-by ".ci/image.sh (image.env)" \
    --env "$IMAGE_ENV" --user "$IMAGE_USER" --workingdir "$IMAGE_WORKDIR" --volume "$IMAGE_CERT_DIR" "${ports[@]}" \
    --entrypoint "$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "$IMAGE_BINARY")" \
    --cmd "$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' "${cmd[@]}")" \
    --label "org.opencontainers.image.source=$IMAGE_SOURCE" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.licenses=$license" \
    "$container"
rm -rf "$layout" "$archive"
mkdir -p "$image_dir"
"${buildah[@]}" commit --quiet --rm --identity-label=false --disable-compression=false --timestamp "$commit_time" "$container" "oci:$layout:$version" >/dev/null
skopeo copy --quiet "oci:$layout:$version" "docker-archive:$archive:kruise-admission:$version"
assemble_seconds=$((SECONDS - phase))

umoci unpack --image "$layout:$version" "$work/bundle" >/dev/null
rootfs="$work/bundle/rootfs"
# The process as the image configures it: user, working directory, entrypoint + default arguments.
mapfile -t process < <(python3 - "$work/bundle/config.json" <<'PY'
import json, sys
process = json.load(open(sys.argv[1]))["process"]
print(process["user"]["uid"]); print(process["user"]["gid"]); print(process["cwd"])
print(*process["args"], sep="\n")
PY
)
uid=${process[0]} gid=${process[1]} cwd=${process[2]} entrypoint=${process[3]}
default_args=("${process[@]:4}")
# The run below listens on loopback ports of its own: the image's --listen is left out of its arguments.
run_args=()
for arg in "${default_args[@]}"; do
    [[ $arg == --listen=* ]] || run_args+=("$arg")
done
[ "$uid:$gid" = "$IMAGE_USER" ] || fail "the image runs as $uid:$gid, image.env says $IMAGE_USER"
manifest="$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"].split(":")[1])' "$layout/index.json")"
layer_bytes="$(python3 -c 'import json, sys; print(sum(l["size"] for l in json.load(open(sys.argv[1]))["layers"]))' "$layout/blobs/sha256/$manifest")"
rootfs_bytes="$(du -sb "$rootfs" | cut -f1)"
say "oci:$layout:$version (manifest sha256:$manifest): layers $((layer_bytes / 1024)) KiB compressed, rootfs $((rootfs_bytes / 1024)) KiB"

# What the Deployment mounts: a writable certificate folder and a read-only cluster folder.
install -d -o "$uid" -g "$gid" "$work/mounts/certs"
cp -r examples/cluster "$work/mounts/cluster"

# Each runner, given ARGS, runs the image's entrypoint with ARGS in place of its default arguments
# (as `docker run IMAGE ARGS` would), with the two mounts above.
podman_runner=(podman --root "$work/podman" --runroot "$work/podman-run" --storage-driver vfs run --rm --read-only
    --network host -v "$work/mounts/certs:$IMAGE_CERT_DIR" -v "$work/mounts/cluster:$IMAGE_CLUSTER_DIR:ro"
    "oci:$layout:$version")
# A mount namespace of its own (so nothing is mounted on the host): the rootfs read-only, the two
# folders bound in, then the inner unshare enters the rootfs as the image's user, from its cwd.
rootfs_runner=(unshare --mount --propagation private sh -ec '
        mount --bind "$1" "$1"
        mount -o remount,bind,ro "$1"
        mount --bind "$2" "$3"
        mount --bind -o ro "$4" "$5"
        shift 5
        exec "$@"' sh "$rootfs" "$work/mounts/certs" "$rootfs$IMAGE_CERT_DIR" "$work/mounts/cluster" "$rootfs$IMAGE_CLUSTER_DIR"
    unshare --root "$rootfs" --wd "$cwd" --setgid "$gid" --setuid "$uid" -- "$entrypoint")
phase=$SECONDS
if podman_error="$(timeout 60 "${podman_runner[@]}" --version 2>&1 >/dev/null)"; then
    say "running with podman"
    runner=("${podman_runner[@]}")
else
    say "podman cannot run it here ($(printf '%s' "$podman_error" | tail -1)); running the unpacked rootfs instead (umoci unpack; unshare --root, user $uid:$gid, working directory $cwd, read-only root)"
    runner=("${rootfs_runner[@]}")
fi

version_line="$(timeout 30 "${runner[@]}" --version)"
say "$entrypoint --version: $version_line"
# build.rs reads the commit and its date from this checkout.
case "$version_line" in
    "kruise-admission $version (commit ${revision:0:12}, built "*) ;;
    *) fail "--version does not name version $version and commit ${revision:0:12}: $version_line" ;;
esac

read -r port metrics_port < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
say "$entrypoint ${run_args[*]} --listen=127.0.0.1:$port --metrics-listen=127.0.0.1:$metrics_port"
timeout 120 "${runner[@]}" "${run_args[@]}" --listen="127.0.0.1:$port" --metrics-listen="127.0.0.1:$metrics_port" \
    --log-format=text 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 100); do
    curl -fsS "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
curl -fsS "http://127.0.0.1:$metrics_port/readyz" >/dev/null 2>&1 || { cat "$work/server.log" >&2; fail "serve did not get ready in 10 s"; }

review=examples/reviews/pod-target-node.json
# The server made its CA in the certificate folder; the name checked is localhost, pinned to 127.0.0.1.
curl -fsS --max-time 10 --cacert "$work/mounts/certs/ca.crt" --resolve "localhost:$port:127.0.0.1" \
    -H 'Content-Type: application/json' --data-binary "@$review" "https://localhost:$port/mutate-pod" >"$work/response.json" \
    || { cat "$work/server.log" >&2; fail "POST /mutate-pod failed"; }
python3 - "$review" "$work/response.json" <<'PY' || { cat "$work/server.log" >&2; fail "unexpected answer to $review"; }
import json, sys
uid = json.load(open(sys.argv[1]))["request"]["uid"]
response = json.load(open(sys.argv[2]))["response"]
assert response["uid"] == uid, f"uid {response['uid']!r}, sent {uid!r}"
assert response["allowed"] is True, response
assert response.get("patchType") == "JSONPatch", response
print(f"image: /mutate-pod answered {sys.argv[1]}: uid {uid} echoed, allowed, with a JSONPatch")
PY
kill "$server_pid"
wait "$server_pid" 2>/dev/null || true
server_pid=""
run_seconds=$((SECONDS - phase))

say "done in $((SECONDS - started)) s: static build ${build_seconds} s, image ${assemble_seconds} s, run ${run_seconds} s"
say "left oci:$layout:$version and $archive"
