#!/usr/bin/env bash
# Render every install path we document into OUT, one YAML file each: the kustomize base and each
# example under examples/kustomize/ (one per component), the Helm chart with its default values
# (which under `helm template` leaves the CRD out) and with each documented option, and
# what `kruise-admission manifests` prints. .ci/manifests-check.sh validates them offline; the
# end-to-end suite (tests/e2e/run.sh) has the real API server check them with
# `kubectl apply --dry-run=server`.
#
#   HELM=... KUBECTL=... BIN=<kruise-admission> .ci/render-manifests.sh OUT
set -euo pipefail

out=${1:?OUT}
: "${HELM:?}" "${KUBECTL:?}" "${BIN:?}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p "$out"
"$KUBECTL" kustomize manifests >"$out/kustomize-base.yaml"
for example in examples/kustomize/*/; do
    "$KUBECTL" kustomize "$example" >"$out/kustomize-$(basename "$example").yaml"
done
chart=charts/kruise-admission
# The defaults: `helm template` sees no cluster, so sidecarSetCRD=auto leaves the CRD out.
"$HELM" template kruise-admission "$chart" --namespace kruise-admission >"$out/helm-default.yaml"
# With the chart's CRD (what `helm install` creates when the cluster has none).
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set sidecarSetCRD=create >"$out/helm-crd.yaml"
for mode in provided cert-manager self-managed; do
    "$HELM" template kruise-admission "$chart" --namespace kruise-admission --set certs.mode=$mode \
        >"$out/helm-$mode.yaml"
done
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set liveCluster.enabled=false \
    >"$out/helm-folder-self-managed.yaml"
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set liveCluster.enabled=false \
    --set certs.mode=provided >"$out/helm-folder-provided.yaml"
# provided with its CA (caBundle must pass the schema's byte format).
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set certs.mode=provided \
    --set certs.provided.caBundle="$(printf -- '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n' | base64 -w0)" \
    >"$out/helm-provided-ca.yaml"
# Every optional object on at once, in another namespace and release name: client authentication
# with a chart-made CA ConfigMap, NetworkPolicy sources restricted.
client_ca=$(printf -- '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----')
"$HELM" template ka "$chart" --namespace platform --set certs.mode=cert-manager \
    --set clientAuth.enabled=true --set-string clientAuth.caCert="$client_ca" \
    --set 'clientAuth.allowedNames={kube-apiserver-webhook-client}' \
    --set 'networkPolicy.apiServer[0].ipBlock.cidr=10.0.0.0/24' \
    --set 'networkPolicy.metrics[0].namespaceSelector.matchLabels.kubernetes\.io/metadata\.name=monitoring' \
    --set metrics.serviceMonitor.enabled=true --set metrics.dashboard.enabled=true --set metrics.prometheusRule.enabled=true \
    --set 'webhooks.excludeNamespaces={monitoring,istio-system}' --set capabilities.deleteProtection.enabled=false \
    --set capabilities.podMutation.failurePolicy=Fail >"$out/helm-everything.yaml"
# Every scheduling, naming and monitoring value on at once (HPA and host network have their own
# renderings below): overrides, pod metadata, extra flags, an existing PriorityClass, affinity,
# spread, the ServiceMonitor and the PrometheusRule.
"$HELM" template ka "$chart" --namespace platform --set nameOverride=webhooks --set fullnameOverride=ka-webhooks \
    --set podAnnotations.example\\.com/owner=platform --set podLabels.team=platform \
    --set 'extraArgs={--max-connections=2048,--max-connections-per-peer=64}' \
    --set serviceAccount.annotations.example\\.com/role=kruise-admission \
    --set priorityClassName=system-cluster-critical \
    --set 'affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=kubernetes.io/os' \
    --set 'affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=In' \
    --set 'affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].values={linux}' \
    --set 'topologySpreadConstraints[0].maxSkew=1' --set 'topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname' \
    --set 'topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule' \
    --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true \
    --set metrics.prometheusRule.labels.release=prometheus --set sidecarSetPolicy=deny >"$out/helm-every-value.yaml"
# The host network: own webhook and metrics ports, ClusterFirstWithHostNet, the NetworkPolicy on them.
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set hostNetwork.enabled=true \
    --set metrics.serviceMonitor.enabled=true --set metrics.prometheusRule.enabled=true >"$out/helm-host-network.yaml"
# The HorizontalPodAutoscaler: the Deployment sets no replicas; shadow mode's rule names its webhooks.
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set autoscaling.enabled=true \
    --set autoscaling.minReplicas=3 --set autoscaling.behavior.scaleDown.stabilizationWindowSeconds=600 \
    --set shadow.enabled=true --set metrics.prometheusRule.enabled=true >"$out/helm-autoscaling.yaml"
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set networkPolicy.enabled=false \
    >"$out/helm-networkpolicy-off.yaml"
# Egress restricted: to the API server's ports in live mode, nothing in folder mode with provided certificates.
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set networkPolicy.egress.enabled=true \
    --set 'networkPolicy.egress.apiServer[0].ipBlock.cidr=10.0.0.0/24' >"$out/helm-networkpolicy-egress.yaml"
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set networkPolicy.egress.enabled=true \
    --set liveCluster.enabled=false --set certs.mode=provided >"$out/helm-networkpolicy-egress-folder.yaml"
# Shadow mode (--shadow, the kruise-admission-shadow configurations), with cert-manager for its annotation.
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set shadow.enabled=true >"$out/helm-shadow.yaml"
"$HELM" template kruise-admission "$chart" --namespace kruise-admission --set shadow.enabled=true \
    --set certs.mode=cert-manager >"$out/helm-shadow-cert-manager.yaml"
"$BIN" manifests rbac --namespace kruise-admission >"$out/binary-rbac.yaml"
"$BIN" manifests webhooks --namespace kruise-admission >"$out/binary-webhooks.yaml"
"$BIN" manifests webhooks --shadow --namespace kruise-admission >"$out/binary-webhooks-shadow.yaml"
"$BIN" manifests rbac --shadow --namespace kruise-admission >"$out/binary-rbac-shadow.yaml"
