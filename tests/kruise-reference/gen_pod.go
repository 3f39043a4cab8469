package main

// The "pod" family: a Pod CREATE through Kruise's /mutate-pod, owned by each kind of workload or by
// none, encoded as the API server sends it (with or without the Pod defaults), beside Namespaces,
// stored SidecarSets and the ControllerRevisions Kruise's SidecarSet controller records.

import (
	"encoding/json"
	"fmt"
	"math/rand"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	daemonutil "k8s.io/kubernetes/pkg/controller/daemon/util"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
	appsv1beta1 "github.com/openkruise/kruise/apis/apps/v1beta1"
	policyv1alpha1 "github.com/openkruise/kruise/apis/policy/v1alpha1"
	"github.com/openkruise/kruise/pkg/control/sidecarcontrol"
	kruiseutil "github.com/openkruise/kruise/pkg/util"
)

var podChain = []hook{mutating("/mutate-pod")}

// owners: the controllers a Pod may belong to (apiVersion, kind), or none.
var owners = [][2]string{
	{"apps.kruise.io/v1alpha1", "CloneSet"},
	{"apps.kruise.io/v1beta1", "StatefulSet"},
	{"apps/v1", "StatefulSet"},
	{"apps/v1", "ReplicaSet"},
	{"batch/v1", "Job"},
	{"apps/v1", "DaemonSet"},
	{"", ""},
}

func genPodCase(r *rand.Rand, _ int) (*Case, error) {
	cluster, gates := sidecarSetCluster(r)
	cluster, revisions, err := pinnedSidecarSets(r, gates, cluster)
	if err != nil {
		return nil, err
	}
	cluster = append(cluster, revisions...)
	more, _, err := storedSidecarSets(r, gates, cluster, 3)
	if err != nil {
		return nil, err
	}
	cluster = more

	ns := pick(r, namespaces...)
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: randomLabels(r)},
		Spec:       podSpec(r),
	}
	owner := pick(r, owners...)
	name := ""
	if owner[1] != "" {
		pod.GenerateName = "web-"
		pod.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: owner[0], Kind: owner[1], Name: "web", UID: types.UID("owner-uid"), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
		}}
		if owner[1] == "StatefulSet" {
			pod.GenerateName, pod.Name = "", "web-0"
		}
		if owner[1] == "DaemonSet" {
			// As the DaemonSet controller creates them: with the daemon tolerations already.
			daemonutil.AddOrUpdateDaemonPodTolerations(&pod.Spec)
		}
	} else if chance(r, 0.5) {
		pod.Name = "solo"
	} else {
		pod.GenerateName = "solo-"
	}
	cluster = podSteps6And7(r, ns, owner, pod, gates, cluster)
	name = pod.Name
	cluster = append(cluster, podUnavailableBudgets(r, ns, owner, pod.Labels)...)
	launchPriority(r, pod)
	if chance(r, 0.6) {
		defaultPod(pod)
	}
	if chance(r, 0.1) {
		pod.Namespace = "" // some requests leave it to request.namespace
	}
	c := &Case{Chain: podChain, Cluster: cluster, Gates: gates,
		Request: request(r, admissionv1.Create, "", "v1", "Pod", "pods", ns, name, pod, nil),
		Note:    fmt.Sprintf("pod in %s owned by %s, %d cluster objects", ns, owner[1], len(cluster))}
	return c, nil
}

// pinnedSidecarSets: sometimes a SidecarSet whose injection is pinned to an older revision, recorded
// the way Kruise's SidecarSet controller records it (HistoryControl.NewRevision), with the
// ControllerRevision in Kruise's namespace.
func pinnedSidecarSets(r *rand.Rand, gates map[string]bool, cluster []map[string]any) ([]map[string]any, []map[string]any, error) {
	if !chance(r, 0.3) {
		return cluster, nil, nil
	}
	name := pick(r, sidecarNames...) + "-pinned"
	current := genSidecarSet(r, name)
	if current.Spec.Selector == nil {
		current.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	}
	older := current.DeepCopy()
	for i := range older.Spec.Containers {
		older.Spec.Containers[i].Image = "fluent-bit:1.9"
	}
	storedOld, err := storeSidecarSet(r, gates, cluster, toMap(older))
	if err != nil || storedOld == nil {
		return cluster, nil, err
	}
	typedOld := &appsv1beta1.SidecarSet{}
	raw, _ := json.Marshal(storedOld)
	if err := json.Unmarshal(raw, typedOld); err != nil {
		return nil, nil, err
	}
	cl, err := newClient(cluster)
	if err != nil {
		return nil, nil, err
	}
	hc := sidecarcontrol.NewHistoryControl(cl)
	cr, err := hc.NewRevision(typedOld, kruiseutil.GetKruiseNamespace(), 1, nil)
	if err != nil {
		return nil, nil, err
	}
	cr.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"}
	cr.ResourceVersion, cr.UID = "7", types.UID("cr-"+name)
	revision := toMap(cr)
	withRevision := append(append([]map[string]any{}, cluster...), revision)

	pin := &appsv1beta1.SidecarSetInjectRevision{Policy: appsv1beta1.AlwaysSidecarSetInjectRevisionPolicy}
	if older.Spec.CustomVersion != "" && chance(r, 0.5) {
		pin.CustomVersion = ptr.To(older.Spec.CustomVersion)
	} else {
		pin.RevisionName = ptr.To(cr.Name)
	}
	current.Spec.InjectionStrategy.Revision = pin
	stored, err := storeSidecarSet(r, gates, withRevision, toMap(current))
	if err != nil || stored == nil {
		return cluster, nil, err
	}
	return append(cluster, stored), []map[string]any{revision}, nil
}

// launchPriority: sometimes the container launch order Kruise's /mutate-pod turns into barrier env:
// the Ordered annotation, or KRUISE_CONTAINER_PRIORITY env values (some equal, some not numbers).
func launchPriority(r *rand.Rand, pod *corev1.Pod) {
	switch {
	case chance(r, 0.1):
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations["apps.kruise.io/container-launch-priority"] = pick(r, "Ordered", "ordered")
	case chance(r, 0.1):
		for i := range pod.Spec.Containers {
			if chance(r, 0.7) {
				pod.Spec.Containers[i].Env = append(pod.Spec.Containers[i].Env,
					corev1.EnvVar{Name: "KRUISE_CONTAINER_PRIORITY", Value: pick(r, "100", "0", "-5", "100", "high")})
			}
		}
	}
}

// podUnavailableBudgets: sometimes the Pod's workload in the cluster (a ReplicaSet maybe controlled by a
// Deployment, whose uid may not be the one the ReplicaSet records), and up to three PodUnavailableBudgets,
// mostly in the Pod's namespace, that guard it by selector or by targetRef, or miss it: the inputs of
// /mutate-pod's kruise.io/related-pub step and of Kruise's controller finder behind it.
func podUnavailableBudgets(r *rand.Rand, ns string, owner [2]string, labels map[string]string) []map[string]any {
	var out []map[string]any
	meta := func(name, uid string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(uid)}
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	replicas := ptr.To(int32(pick(r, 1, 3)))
	if owner[1] != "" && chance(r, 0.7) {
		tm := metav1.TypeMeta{APIVersion: owner[0], Kind: owner[1]}
		var workload any
		switch owner {
		case [2]string{"apps.kruise.io/v1alpha1", "CloneSet"}:
			workload = &appsv1alpha1.CloneSet{TypeMeta: tm, ObjectMeta: meta("web", "owner-uid"), Spec: appsv1alpha1.CloneSetSpec{Replicas: replicas, Selector: selector}}
		case [2]string{"apps.kruise.io/v1beta1", "StatefulSet"}:
			workload = &appsv1beta1.StatefulSet{TypeMeta: tm, ObjectMeta: meta("web", "owner-uid"), Spec: appsv1beta1.StatefulSetSpec{Replicas: replicas, Selector: selector}}
		case [2]string{"apps/v1", "StatefulSet"}:
			workload = &appsv1.StatefulSet{TypeMeta: tm, ObjectMeta: meta("web", "owner-uid"), Spec: appsv1.StatefulSetSpec{Replicas: replicas, Selector: selector}}
		case [2]string{"apps/v1", "ReplicaSet"}:
			rs := &appsv1.ReplicaSet{TypeMeta: tm, ObjectMeta: meta("web", "owner-uid"), Spec: appsv1.ReplicaSetSpec{Replicas: replicas, Selector: selector}}
			if chance(r, 0.7) {
				rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web-deploy", UID: "deploy-uid", Controller: ptr.To(true)}}
				if chance(r, 0.8) {
					out = append(out, toMap(&appsv1.Deployment{
						TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
						ObjectMeta: meta("web-deploy", pick(r, "deploy-uid", "deploy-uid", "stale-uid")),
						Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(int32(4)), Selector: selector},
					}))
				}
			}
			workload = rs
		case [2]string{"batch/v1", "Job"}:
			workload = &batchv1.Job{TypeMeta: tm, ObjectMeta: meta("web", "owner-uid")}
		case [2]string{"apps/v1", "DaemonSet"}:
			workload = &appsv1.DaemonSet{TypeMeta: tm, ObjectMeta: meta("web", "owner-uid"), Spec: appsv1.DaemonSetSpec{Selector: selector}}
		}
		out = append(out, toMap(workload))
	}
	names := subset(r, 0.4, "pub-a", "pub-b", "pub-c")
	for _, name := range names {
		pub := &policyv1alpha1.PodUnavailableBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy.kruise.io/v1alpha1", Kind: "PodUnavailableBudget"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       policyv1alpha1.PodUnavailableBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		}
		if chance(r, 0.15) {
			pub.Namespace = pick(r, namespaces...)
		}
		byRef := chance(r, 0.5)
		if !byRef || chance(r, 0.15) {
			pub.Spec.Selector = pubSelector(r, labels)
		}
		if byRef {
			apiVersion := owner[0]
			if apiVersion == "" || chance(r, 0.3) {
				apiVersion = pick(r, "apps/v1", "apps/v1beta1", "apps.kruise.io/v1alpha1", "apps.kruise.io/v1beta1", "batch/v1", "extensions/v1beta1")
			}
			kind := owner[1]
			if kind == "" || chance(r, 0.3) {
				kind = pick(r, "Deployment", "ReplicaSet", "StatefulSet", "CloneSet", "Job")
			}
			pub.Spec.TargetReference = &policyv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: pick(r, "web", "web", "web-deploy", "other")}
		}
		out = append(out, toMap(pub))
	}
	return out
}

// pubSelector: a PUB selector that may select the Pod's labels or not; empty or with an operator Go
// cannot convert sometimes (both select nothing).
func pubSelector(r *rand.Rand, labels map[string]string) *metav1.LabelSelector {
	key := pick(r, podLabelKeys...)
	value := pick(r, podLabelValues[key]...)
	if v, ok := labels[key]; ok && chance(r, 0.6) {
		value = v
	}
	switch {
	case chance(r, 0.1):
		return &metav1.LabelSelector{}
	case chance(r, 0.5):
		return &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	default:
		op := pick(r, metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist, "Is")
		req := metav1.LabelSelectorRequirement{Key: key, Operator: op}
		if op != metav1.LabelSelectorOpExists && op != metav1.LabelSelectorOpDoesNotExist {
			req.Values = []string{value}
		}
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{req}}
	}
}
