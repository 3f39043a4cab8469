package main

// The "validate-pod" family: Pod DELETEs, evictions and UPDATEs through /validate-pod against a
// PodUnavailableBudget in every state that decides (its allowance, what it already records, the
// operations it protects), for pods ready or not, consistent or not, guarded or exempt. Kruise's
// budget write is compared with ours (writes.go).

import (
	"fmt"
	"math/rand"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	policyv1alpha1 "github.com/openkruise/kruise/apis/policy/v1alpha1"
)

const imageDigest = "sha256:a9286defaba7b3a519d585ba0e37d0b2cbee74ebfe590960b0b1d6a5e97d1e1d"

// earlier is a time the budget's records already hold (long before any case's clock).
var earlier = metav1.Unix(1700000000, 0)

// guardedPod is a pod of namespace "shop" that may name the budget "web", ready or not.
func guardedPod(r *rand.Rand, name string) *corev1.Pod {
	image := pick(r, "nginx:1.27", "busybox", "registry.example.com/app@"+imageDigest)
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name), ResourceVersion: "5",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image, Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resourceQuantities("1")[0]},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resourceQuantities("2")[0]},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: image,
				ImageID: "docker-pullable://registry.example.com/app@" + imageDigest}}},
	}
	switch {
	case chance(r, 0.8):
		pod.Annotations["kruise.io/related-pub"] = "web"
	case chance(r, 0.3):
		pod.Annotations["kruise.io/related-pub"] = "gone"
	}
	if chance(r, 0.1) {
		pod.Annotations["pub.kruise.io/no-protect"] = pick(r, "true", "false")
	}
	if chance(r, 0.1) {
		pod.Status.Phase = pick(r, corev1.PodPending, corev1.PodSucceeded)
	}
	if chance(r, 0.1) {
		pod.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	if chance(r, 0.05) {
		pod.Labels["unavailable-pod.kruise.io/drain"] = "true"
	}
	if chance(r, 0.05) {
		pod.DeletionTimestamp = &earlier
		pod.Finalizers = []string{"example.com/keep"}
	}
	if chance(r, 0.1) { // the image the kubelet reports is another one
		pod.Status.ContainerStatuses[0].ImageID = "docker-pullable://registry.example.com/app@sha256:" + fmt.Sprintf("%064d", 0)
	}
	if chance(r, 0.1) { // an in-place update in progress, or done
		pod.Annotations["apps.kruise.io/inplace-update-state"] = pick(r,
			`{"revision":"r2","nextContainerImages":{"app":"nginx:1.28"}}`,
			`{"revision":"r2","lastContainerStatuses":{"app":{"imageID":"docker-pullable://registry.example.com/app@`+imageDigest+`"}}}`,
			`{"revision":"r2","lastContainerStatuses":{"app":{"imageID":"old"}}}`,
			`{"revision":"r2","updateTimestamp":"not a time"}`,
			`{`)
	}
	if chance(r, 0.03) {
		pod.Annotations["apps.kruise.io/inplace-update-grace"] = `{"revision":"r2"}`
	}
	return pod
}

// budget is the PodUnavailableBudget "web" in one of the states that decide.
func budget(r *rand.Rand, podName string) *policyv1alpha1.PodUnavailableBudget {
	one := intstr.FromInt32(1)
	pub := &policyv1alpha1.PodUnavailableBudget{
		TypeMeta: metav1.TypeMeta{APIVersion: "policy.kruise.io/v1alpha1", Kind: "PodUnavailableBudget"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "uid-pub", ResourceVersion: "7",
			Annotations: map[string]string{}},
		Spec: policyv1alpha1.PodUnavailableBudgetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			MaxUnavailable: &one,
		},
		Status: policyv1alpha1.PodUnavailableBudgetStatus{
			ObservedGeneration: 1,
			UnavailableAllowed: int32(pick(r, 0, 1, 1, 2, 3, -1)),
			DesiredAvailable:   int32(pick(r, 2, 2, 3, 0)),
			CurrentAvailable:   3,
			TotalReplicas:      4,
		},
	}
	if chance(r, 0.3) {
		pub.Annotations["kruise.io/pub-protect-operations"] = pick(r, "", "DELETE", "EVICT", "UPDATE", "RESIZE",
			"DELETE,EVICT", "UPDATE,RESIZE", "DELETE, EVICT", "delete")
	}
	records := func() map[string]metav1.Time {
		names := subset(r, 0.5, podName, "other")
		if len(names) == 0 {
			return nil
		}
		m := map[string]metav1.Time{}
		for _, n := range names {
			m[n] = earlier
		}
		return m
	}
	if chance(r, 0.3) {
		pub.Status.DisruptedPods = records()
	}
	if chance(r, 0.3) {
		pub.Status.UnavailablePods = records()
	}
	return pub
}

// optionsWithDryRun is the operation's options as kube-apiserver sends them for a dry-run request.
func optionsWithDryRun(req *admissionv1.AdmissionRequest, kind string) {
	req.DryRun = new(bool)
	*req.DryRun = true
	req.Options = rawOf(map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": kind, "dryRun": []string{"All"}})
}

func genValidatePodCase(r *rand.Rand, _ int) (*Case, error) {
	name := pick(r, "p1", "p2")
	pod := guardedPod(r, name)
	cluster := namespaceObjects()
	pubPresent := chance(r, 0.9)
	if pubPresent {
		cluster = append(cluster, toMap(budget(r, name)))
	}
	gates := map[string]bool{}
	if chance(r, 0.3) {
		gates["InPlacePodVerticalScaling"] = true
	}
	var req admissionv1.AdmissionRequest
	var note string
	dryRun := chance(r, 0.12)
	switch op := pick(r, "delete", "delete", "evict", "evict", "update", "update"); op {
	case "delete":
		req = request(r, admissionv1.Delete, "", "v1", "Pod", "pods", "shop", name, nil, pod)
		if dryRun {
			optionsWithDryRun(&req, "DeleteOptions")
		}
		note = "delete"
	case "evict":
		if chance(r, 0.92) {
			cluster = append(cluster, toMap(pod))
		}
		eviction := &policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}}
		evictionDryRun := chance(r, 0.2)
		if evictionDryRun { // kubectl drain --dry-run=server
			eviction.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{"All"}}
		}
		req = request(r, admissionv1.Create, "policy", "v1", "Eviction", "pods", "shop", name, eviction, nil)
		req.Resource = metav1.GroupVersionResource{Group: "", Version: "v1", Resource: "pods"}
		req.SubResource = "eviction"
		if dryRun {
			optionsWithDryRun(&req, "CreateOptions")
		}
		note = fmt.Sprintf("evict (deleteOptions.dryRun %t)", evictionDryRun)
	case "update":
		gates["PodUnavailableBudgetUpdateGate"] = chance(r, 0.75)
		newPod := pod.DeepCopy()
		change := pick(r, "image", "labels", "unavailable label", "cpu limit", "cpu limit, restart policy",
			"memory request", "annotations", "annotation removed")
		switch change {
		case "image":
			newPod.Spec.Containers[0].Image = "nginx:1.28"
		case "labels":
			newPod.Labels["tier"] = "front"
		case "unavailable label":
			newPod.Labels["unavailable-pod.kruise.io/x"] = "true"
		case "cpu limit":
			newPod.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resourceQuantities("3")[0]
		case "cpu limit, restart policy":
			newPod.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resourceQuantities("3")[0]
			newPod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU,
				RestartPolicy: pick(r, corev1.RestartContainer, corev1.NotRequired)}}
		case "memory request":
			newPod.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resourceQuantities("64Mi")[0]
		case "annotations":
			newPod.Annotations["note"] = "x"
		case "annotation removed":
			delete(newPod.Annotations, "kruise.io/related-pub")
			newPod.Spec.Containers[0].Image = "nginx:1.28"
		}
		req = request(r, admissionv1.Update, "", "v1", "Pod", "pods", "shop", name, newPod, pod)
		if dryRun {
			optionsWithDryRun(&req, "UpdateOptions")
		}
		note = "update: " + change
	}
	c := &Case{Chain: []hook{validating("/validate-pod")}, Cluster: cluster, Request: req, Gates: gates,
		Note: fmt.Sprintf("%s of %s (budget %t, dry run %t), gates %v", note, name, pubPresent, dryRun, gates)}
	return c, nil
}
