package main

// The "stamp" family: a Pod CREATE that names its node, through our /mutate-pod, against Kruise's
// /mutate-pod followed by upstream Kubernetes' own DaemonSet helpers (k8s.io/kubernetes/pkg/controller/
// daemon/util, the version Kruise vendors): ReplaceDaemonSetPodNodeNameNodeAffinity pins the pod,
// AddOrUpdateDaemonPodTolerations adds the daemon tolerations, and nodeName is cleared so the scheduler
// binds it. Kruise makes this stamp in its controllers, not at admission; its /mutate-pod still runs
// first (a pod of an apps.kruise.io DaemonSet gets its readiness gate there).

import (
	"encoding/json"
	"fmt"
	"math/rand"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	daemonutil "k8s.io/kubernetes/pkg/controller/daemon/util"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const targetNodeAnnotation = "kruise-admission.dev/target-node"

func genStampCase(r *rand.Rand, _ int) (*Case, error) {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "daemon", Namespace: "shop"},
		Spec:       podSpec(r),
	}
	node := pick(r, "node-a", "node-b")
	trigger := pick(r, "annotation", "daemonset-owner", "opt-in")
	switch trigger {
	case "annotation":
		pod.Annotations = map[string]string{targetNodeAnnotation: node}
		if chance(r, 0.3) {
			pod.Spec.NodeName = "other-node"
		}
	case "daemonset-owner":
		pod.Spec.NodeName = node
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: pick(r, "apps/v1", "apps.kruise.io/v1beta1"), Kind: "DaemonSet", Name: "ds", UID: "ds-uid", Controller: ptr.To(true)}}
	default:
		pod.Spec.NodeName = node
		pod.Annotations = map[string]string{"kruise-admission.dev/daemon-scheduling": "true"}
	}
	if chance(r, 0.5) {
		pod.Spec.Affinity = randomAffinity(r)
	}
	if chance(r, 0.4) {
		pod.Spec.Tolerations = subset(r, 0.5,
			corev1.Toleration{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To(int64(300))},
			corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "infra", Effect: corev1.TaintEffectNoSchedule},
			corev1.Toleration{Key: "node.kubernetes.io/unschedulable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		)
	}
	if chance(r, 0.3) {
		pod.Spec.HostNetwork = true
	}
	if chance(r, 0.6) {
		defaultPod(pod)
	}
	c := &Case{Cluster: namespaceObjects(), Note: fmt.Sprintf("pin to %s by %s", node, trigger),
		Request: request(r, admissionv1.Create, "", "v1", "Pod", "pods", "shop", pod.Name, pod, nil)}
	c.Reference = func(cl client.Client) (Outcome, error) {
		mutated, err := kruiseChain(&Case{Chain: podChain, Request: c.Request}, cl)
		if err != nil || !mutated.Allowed {
			return mutated, err
		}
		expected := &corev1.Pod{}
		if err := json.Unmarshal(mutated.Object, expected); err != nil {
			return Outcome{}, err
		}
		expected.Spec.Affinity = daemonutil.ReplaceDaemonSetPodNodeNameNodeAffinity(expected.Spec.Affinity, node)
		daemonutil.AddOrUpdateDaemonPodTolerations(&expected.Spec)
		expected.Spec.NodeName = ""
		mutated.Object, err = json.Marshal(expected)
		return mutated, err
	}
	return c, nil
}

func randomAffinity(r *rand.Rand) *corev1.Affinity {
	a := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	if chance(r, 0.6) {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}},
			{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"node-z"}}}},
		}[:1+r.Intn(2)]}
	}
	if chance(r, 0.5) {
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = []corev1.PreferredSchedulingTerm{{Weight: 10,
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpExists}}}}}
	}
	if chance(r, 0.3) {
		a.PodAntiAffinity = &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
			{TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "daemon"}}}}}
	}
	return a
}
