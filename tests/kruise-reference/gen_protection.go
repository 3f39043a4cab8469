package main

// The "protection" family: DELETEs of every kind delete protection covers, with and without the
// policy.kruise.io/delete-protection label, beside the pods, PVCs and custom resources a Cascading
// Namespace or CRD counts. Kruise's ResourcesDeletionProtection gate is on (kruise-admission's
// default), and sometimes its DeletionProtectionForCRDCascadingGate too.

import (
	"fmt"
	"math/rand"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
	appsv1beta1 "github.com/openkruise/kruise/apis/apps/v1beta1"
)

type protected struct {
	path, group, version, kind, resource string
	namespaced                           bool
	make                                 func(meta metav1.ObjectMeta, replicas *int32) any
}

var protectedKinds = []protected{
	{"/validate-namespace", "", "v1", "Namespace", "namespaces", false, func(m metav1.ObjectMeta, _ *int32) any {
		return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: m}
	}},
	{"/validate-customresourcedefinition", "apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", false, func(m metav1.ObjectMeta, _ *int32) any {
		return widgetCRD(m)
	}},
	{"/validate-apps-deployment", "apps", "v1", "Deployment", "deployments", true, func(m metav1.ObjectMeta, n *int32) any {
		return &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: m, Spec: appsv1.DeploymentSpec{Replicas: n}}
	}},
	{"/validate-apps-replicaset", "apps", "v1", "ReplicaSet", "replicasets", true, func(m metav1.ObjectMeta, n *int32) any {
		return &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"}, ObjectMeta: m, Spec: appsv1.ReplicaSetSpec{Replicas: n}}
	}},
	{"/validate-apps-statefulset", "apps", "v1", "StatefulSet", "statefulsets", true, func(m metav1.ObjectMeta, n *int32) any {
		return &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}, ObjectMeta: m, Spec: appsv1.StatefulSetSpec{Replicas: n}}
	}},
	{"/validate-service", "", "v1", "Service", "services", true, func(m metav1.ObjectMeta, _ *int32) any {
		return &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}, ObjectMeta: m}
	}},
	{"/validate-ingress", "networking.k8s.io", "v1", "Ingress", "ingresses", true, func(m metav1.ObjectMeta, _ *int32) any {
		return &networkingv1.Ingress{TypeMeta: metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"}, ObjectMeta: m}
	}},
	{"/validate-apps-kruise-io-v1alpha1-cloneset", "apps.kruise.io", "v1alpha1", "CloneSet", "clonesets", true, func(m metav1.ObjectMeta, n *int32) any {
		return &appsv1alpha1.CloneSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet"}, ObjectMeta: m, Spec: appsv1alpha1.CloneSetSpec{Replicas: n}}
	}},
	{"/validate-apps-kruise-io-statefulset", "apps.kruise.io", "v1beta1", "StatefulSet", "statefulsets", true, func(m metav1.ObjectMeta, n *int32) any {
		return &appsv1beta1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet"}, ObjectMeta: m, Spec: appsv1beta1.StatefulSetSpec{Replicas: n}}
	}},
	{"/validate-apps-kruise-io-statefulset", "apps.kruise.io", "v1alpha1", "StatefulSet", "statefulsets", true, func(m metav1.ObjectMeta, n *int32) any {
		return &appsv1alpha1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "StatefulSet"}, ObjectMeta: m, Spec: appsv1alpha1.StatefulSetSpec{Replicas: n}}
	}},
	{"/validate-apps-kruise-io-v1alpha1-uniteddeployment", "apps.kruise.io", "v1alpha1", "UnitedDeployment", "uniteddeployments", true, func(m metav1.ObjectMeta, n *int32) any {
		return &appsv1alpha1.UnitedDeployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "UnitedDeployment"}, ObjectMeta: m, Spec: appsv1alpha1.UnitedDeploymentSpec{Replicas: n}}
	}},
}

// widgetCRD is the CRD of the custom resources a Cascading CRD case counts.
func widgetCRD(m metav1.ObjectMeta) *apiextensionsv1.CustomResourceDefinition {
	m.Name = "widgets.example.com"
	return &apiextensionsv1.CustomResourceDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apiextensions.k8s.io/v1", Kind: "CustomResourceDefinition"},
		ObjectMeta: m,
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}},
			},
		},
	}
}

func genProtectionCase(r *rand.Rand, _ int) (*Case, error) {
	k := pick(r, protectedKinds...)
	meta := metav1.ObjectMeta{Name: "target", UID: "uid-target", ResourceVersion: "9"}
	if k.namespaced {
		meta.Namespace = "shop"
	}
	label := pick(r, "", "Always", "Cascading", "always", "Never")
	if label != "" {
		meta.Labels = map[string]string{"policy.kruise.io/delete-protection": label}
	}
	if chance(r, 0.1) {
		now := metav1.Unix(1700000000, 0)
		meta.DeletionTimestamp = &now
	}
	var replicas *int32
	if chance(r, 0.8) {
		replicas = ptr.To(int32(pick(r, 0, 2)))
	}
	obj := k.make(meta, replicas)
	if k.kind == "Namespace" {
		meta.Name = "shop"
		obj = k.make(meta, nil)
	}

	cluster := namespaceObjects()
	// What a Cascading Namespace or CRD counts: pods and PVCs in "shop", Widgets anywhere.
	for i := 0; i < r.Intn(3); i++ {
		phase := pick(r, corev1.PodRunning, corev1.PodPending, corev1.PodSucceeded, corev1.PodFailed)
		cluster = append(cluster, toMap(&corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: "shop"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
			Status:     corev1.PodStatus{Phase: phase}}))
	}
	for i := 0; i < r.Intn(3); i++ {
		cluster = append(cluster, toMap(&corev1.PersistentVolumeClaim{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c%d", i), Namespace: "shop"},
			Status:     corev1.PersistentVolumeClaimStatus{Phase: pick(r, corev1.ClaimBound, corev1.ClaimPending)}}))
	}
	for i := 0; i < r.Intn(3); i++ {
		w := map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w%d", i), "namespace": pick(r, "shop", "batch")}}
		if chance(r, 0.3) {
			w["metadata"].(map[string]any)["deletionTimestamp"] = "2023-11-14T22:13:20Z"
			w["metadata"].(map[string]any)["finalizers"] = []any{"example.com/keep"}
		}
		cluster = append(cluster, w)
	}
	gates := map[string]bool{"ResourcesDeletionProtection": true}
	if chance(r, 0.5) {
		gates["DeletionProtectionForCRDCascadingGate"] = true
	}
	c := &Case{Chain: []hook{validating(k.path)}, Cluster: cluster, Gates: gates,
		Request: request(r, admissionv1.Delete, k.group, k.version, k.kind, k.resource, meta.Namespace, meta.Name, nil, obj),
		Note:    fmt.Sprintf("delete %s labelled %q, %d cluster objects, gates %v", k.kind, label, len(cluster), gates)}
	return c, nil
}
