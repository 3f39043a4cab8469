package main

// The "workloadspread" family: a Pod CREATE through Kruise's /mutate-pod where a WorkloadSpread of
// the Pod's namespace may target its workload (CloneSet, Advanced StatefulSet, StatefulSet, a
// Deployment through its ReplicaSet, Job), with Fixed and Adaptive subsets, int, percent and absent
// maxReplicas, patches, tolerations and node selector terms, with and without (versioned) subset
// statuses. The status Kruise writes into the WorkloadSpread is compared as every status write is
// (writes.go), with the UUIDs a Pod without a name is recorded under normalised.

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"regexp"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
	appsv1beta1 "github.com/openkruise/kruise/apis/apps/v1beta1"
	kruiseutil "github.com/openkruise/kruise/pkg/util"
)

// wsOwners: the kinds a WorkloadSpread case's Pod belongs to (apiVersion, kind); the last one is
// not a kind WorkloadSpread follows.
var wsOwners = [][2]string{
	{"apps.kruise.io/v1alpha1", "CloneSet"},
	{"apps.kruise.io/v1beta1", "StatefulSet"},
	{"apps/v1", "StatefulSet"},
	{"apps/v1", "ReplicaSet"},
	{"apps/v1", "ReplicaSet"},
	{"batch/v1", "Job"},
	{"v1", "ReplicationController"},
}

const wsNamespace = "shop"

func genWorkloadSpreadCase(r *rand.Rand, _ int) (*Case, error) {
	cluster := namespaceObjects()
	gates := map[string]bool{}
	if chance(r, 0.03) {
		gates["WorkloadSpread"] = false
	}
	owner := pick(r, wsOwners...)
	labels := randomLabels(r)
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: wsNamespace, Labels: labels},
		Spec:       podSpec(r),
		// Owned by the workload (named web; a ReplicaSet web-6d8f9, of the Deployment web).
	}
	workloadName := "web"
	if owner[1] == "ReplicaSet" {
		workloadName = "web-6d8f9"
		if chance(r, 0.8) {
			labels["pod-template-hash"] = pick(r, "6d8f9", "6d8f9", "old42")
		}
	}
	if chance(r, 0.95) {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: owner[0], Kind: owner[1], Name: workloadName,
			UID: types.UID("owner-uid"), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
	}
	switch {
	case owner[1] == "StatefulSet":
		pod.Name = fmt.Sprintf("web-%d", r.Intn(12))
		labels["controller-revision-hash"] = "web-7c9b5"
	case chance(r, 0.5):
		pod.GenerateName = "web-"
	default:
		pod.Name = "web-" + pick(r, "x7k2p", "q9z4m", "b2c3d")
	}
	if chance(r, 0.2) {
		pod.Spec.PriorityClassName, pod.Spec.Priority = "low", ptr.To(int32(10))
	}
	if chance(r, 0.05) {
		pod.Status.Phase = corev1.PodSucceeded
	}
	cluster = append(cluster, wsWorkloads(r, owner)...)

	var sidecarSets []map[string]any
	if chance(r, 0.3) {
		stored, err := storeSidecarSet(r, gates, cluster, toMap(zoneSidecarSet()))
		if err != nil {
			return nil, err
		}
		if stored != nil {
			sidecarSets = append(sidecarSets, stored)
		}
	}
	cluster = append(cluster, sidecarSets...)
	spreads := 1
	if chance(r, 0.15) {
		spreads = 0
	} else if chance(r, 0.15) {
		spreads = 2
	}
	for i := 0; i < spreads; i++ {
		cluster = append(cluster, toMap(genWorkloadSpread(r, fmt.Sprintf("spread-%d", i), owner, pod)))
	}
	if chance(r, 0.1) {
		pod.Namespace = "" // left to request.namespace
	}
	req := request(r, admissionv1.Create, "", "v1", "Pod", "pods", wsNamespace, pod.Name, pod, nil)
	if chance(r, 0.05) {
		req.DryRun = ptr.To(true)
		req.Options = rawOf(map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "dryRun": []string{"All"}})
	}
	// Kruise keeps the WorkloadSpreads it wrote in a process-wide cache, newer than this case's
	// (a resourceVersion it bumped): each case starts without it, as a fresh kruise-manager would.
	kruiseutil.GlobalCache.Replace(nil, "")
	return &Case{Chain: podChain, Cluster: cluster, Gates: gates, Request: req,
		Note: fmt.Sprintf("pod %q owned by %s, %d WorkloadSpreads", pod.Name+pod.GenerateName, owner[1], spreads)}, nil
}

// wsWorkloads: the Pod's workload as the cluster holds it (sometimes missing), and for a ReplicaSet
// its Deployment (sometimes missing) whose template the ReplicaSet's is.
func wsWorkloads(r *rand.Rand, owner [2]string) []map[string]any {
	if chance(r, 0.1) {
		return nil
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: wsNamespace, UID: types.UID("owner-uid"), ResourceVersion: "3"}
	}
	tm := metav1.TypeMeta{APIVersion: owner[0], Kind: owner[1]}
	replicas := ptr.To(int32(pick(r, 2, 4, 5, 10)))
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	switch owner[1] {
	case "CloneSet":
		return []map[string]any{toMap(&appsv1alpha1.CloneSet{TypeMeta: tm, ObjectMeta: meta("web"), Spec: appsv1alpha1.CloneSetSpec{Replicas: replicas, Selector: selector}})}
	case "StatefulSet":
		if owner[0] == "apps/v1" {
			return []map[string]any{toMap(&appsv1.StatefulSet{TypeMeta: tm, ObjectMeta: meta("web"), Spec: appsv1.StatefulSetSpec{Replicas: replicas, Selector: selector}})}
		}
		return []map[string]any{toMap(&appsv1beta1.StatefulSet{TypeMeta: tm, ObjectMeta: meta("web"), Spec: appsv1beta1.StatefulSetSpec{Replicas: replicas, Selector: selector}})}
	case "ReplicaSet":
		rs := &appsv1.ReplicaSet{TypeMeta: tm, ObjectMeta: meta("web-6d8f9"), Spec: appsv1.ReplicaSetSpec{Replicas: replicas, Selector: selector}}
		rs.Labels = map[string]string{"pod-template-hash": "6d8f9"}
		rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "deploy-uid", Controller: ptr.To(true)}}
		out := []map[string]any{toMap(rs)}
		if chance(r, 0.85) {
			out = append(out, toMap(&appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
				ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: wsNamespace, UID: "deploy-uid"},
				Spec:       appsv1.DeploymentSpec{Replicas: replicas, Selector: selector}}))
		}
		return out
	case "Job":
		return []map[string]any{toMap(&batchv1.Job{TypeMeta: tm, ObjectMeta: meta("web"), Spec: batchv1.JobSpec{Parallelism: replicas}})}
	}
	return nil
}

// zoneSidecarSet selects the label a subset's patch adds: injected only when SidecarSet injection
// reads the Pod as WorkloadSpread left it.
func zoneSidecarSet() *appsv1beta1.SidecarSet {
	return &appsv1beta1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "zone-agent"},
		Spec: appsv1beta1.SidecarSetSpec{
			Selector:   &metav1.LabelSelector{MatchLabels: map[string]string{"topology.example/zone": "zone-a"}},
			Containers: []appsv1beta1.SidecarContainer{{Container: corev1.Container{Name: "zone-agent", Image: "busybox"}}},
		},
	}
}

// genWorkloadSpread: a WorkloadSpread that mostly targets the Pod's workload (or its Deployment),
// with 1 to 3 subsets and, half the time, a status as Kruise's controller writes it.
func genWorkloadSpread(r *rand.Rand, name string, owner [2]string, pod *corev1.Pod) *appsv1alpha1.WorkloadSpread {
	target := &appsv1alpha1.TargetReference{APIVersion: owner[0], Kind: owner[1], Name: "web"}
	if owner[1] == "ReplicaSet" {
		target = &appsv1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
		if chance(r, 0.15) {
			target = &appsv1alpha1.TargetReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-6d8f9"}
		}
	}
	if chance(r, 0.15) {
		target = &appsv1alpha1.TargetReference{APIVersion: pick(r, "apps/v1", "apps.kruise.io/v1alpha1"), Kind: pick(r, "Deployment", "CloneSet"), Name: "other"}
	}
	ws := &appsv1alpha1.WorkloadSpread{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "WorkloadSpread"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: wsNamespace, UID: types.UID("uid-" + name), ResourceVersion: "5", Generation: 1},
		Spec:       appsv1alpha1.WorkloadSpreadSpec{TargetReference: target},
	}
	if chance(r, 0.3) {
		ws.Spec.TargetFilter = &appsv1alpha1.TargetFilter{Selector: pubSelector(r, pod.Labels)}
		if chance(r, 0.1) {
			ws.Spec.TargetFilter.Selector = nil
		}
		if chance(r, 0.6) {
			// Where the replicas of a percent maxReplicas are read (a path that is missing fails).
			ws.Spec.TargetFilter.ReplicasPathList = pick(r, []string{"spec.replicas"}, []string{"spec.replicas", "spec.replicas"},
				[]string{"spec.parallelism"}, []string{"spec.missing"}, []string{"metadata.generation"})
		}
	}
	adaptive := chance(r, 0.4)
	ws.Spec.ScheduleStrategy.Type = appsv1alpha1.FixedWorkloadSpreadScheduleStrategyType
	if adaptive {
		ws.Spec.ScheduleStrategy = appsv1alpha1.WorkloadSpreadScheduleStrategy{Type: appsv1alpha1.AdaptiveWorkloadSpreadScheduleStrategyType,
			Adaptive: &appsv1alpha1.AdaptiveWorkloadSpreadStrategy{RescheduleCriticalSeconds: ptr.To(int32(30))}}
	}
	n := 1 + r.Intn(3)
	for i := 0; i < n; i++ {
		ws.Spec.Subsets = append(ws.Spec.Subsets, genSubset(r, fmt.Sprintf("subset-%c", 'a'+i), i == n-1))
	}
	if chance(r, 0.5) {
		ws.Status = genWorkloadSpreadStatus(r, ws, pod, adaptive)
	}
	return ws
}

var zones = []string{"zone-a", "zone-b", "zone-c"}

func genSubset(r *rand.Rand, name string, last bool) appsv1alpha1.WorkloadSpreadSubset {
	zone := zones[int(name[len(name)-1]-'a')]
	s := appsv1alpha1.WorkloadSpreadSubset{Name: name}
	switch {
	case last && chance(r, 0.4):
		// the elastic subset: no limit
	case chance(r, 0.5):
		s.MaxReplicas = ptr.To(intstr.FromInt32(int32(r.Intn(4))))
	case chance(r, 0.85):
		s.MaxReplicas = ptr.To(intstr.FromString(pick(r, "30%", "50%", "0%", "100%")))
	default:
		s.MaxReplicas = ptr.To(intstr.FromString(pick(r, "2", "x")))
	}
	term := corev1.NodeSelectorRequirement{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}
	if chance(r, 0.6) {
		s.RequiredNodeSelectorTerm = &corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{term}}
		if chance(r, 0.2) {
			s.RequiredNodeSelectorTerm.MatchFields = []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"node-9"}}}
		}
	}
	if chance(r, 0.4) {
		s.PreferredNodeSelectorTerms = []corev1.PreferredSchedulingTerm{{Weight: int32(1 + r.Intn(100)),
			Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "node.example/pool", Operator: corev1.NodeSelectorOpIn, Values: []string{"spot"}}}}}}
	}
	if chance(r, 0.4) {
		s.Tolerations = []corev1.Toleration{{Key: "zone-taint", Operator: corev1.TolerationOpEqual, Value: zone, Effect: corev1.TaintEffectNoSchedule}}
	}
	if chance(r, 0.5) {
		s.Patch = runtime.RawExtension{Raw: []byte(subsetPatch(r, zone))}
	}
	return s
}

// subsetPatch: a strategic merge patch of the Pod as WorkloadSpread users write them: labels and
// annotations (added, or a label removed), a container's env merged by name, a priority class.
func subsetPatch(r *rand.Rand, zone string) string {
	metadata := map[string]any{"labels": map[string]any{"topology.example/zone": zone, "workloadspread.example/patched": "true"}}
	if chance(r, 0.3) {
		metadata["annotations"] = map[string]any{"subset.example/zone": zone}
	}
	patch := map[string]any{"metadata": metadata}
	spec := map[string]any{}
	if chance(r, 0.3) {
		spec["containers"] = []any{map[string]any{"name": "app0", "env": []any{map[string]any{"name": "ZONE", "value": zone}}}}
	}
	if chance(r, 0.15) {
		spec["priorityClassName"] = pick(r, "high", "low")
	}
	if len(spec) > 0 {
		patch["spec"] = spec
	}
	raw, _ := json.Marshal(patch)
	return string(raw)
}

// genWorkloadSpreadStatus: subset statuses as Kruise's controller writes them, per version for a
// Deployment's pods, sometimes already recording the Pod, with Adaptive subsets marked unschedulable.
func genWorkloadSpreadStatus(r *rand.Rand, ws *appsv1alpha1.WorkloadSpread, pod *corev1.Pod, adaptive bool) appsv1alpha1.WorkloadSpreadStatus {
	statuses := func() []appsv1alpha1.WorkloadSpreadSubsetStatus {
		var out []appsv1alpha1.WorkloadSpreadSubsetStatus
		for _, s := range ws.Spec.Subsets {
			st := appsv1alpha1.WorkloadSpreadSubsetStatus{Name: s.Name, Replicas: int32(r.Intn(3)), MissingReplicas: int32(r.Intn(3))}
			if s.MaxReplicas == nil {
				st.MissingReplicas = -1
			}
			if adaptive && chance(r, 0.3) {
				st.Conditions = []appsv1alpha1.WorkloadSpreadSubsetCondition{{Type: appsv1alpha1.SubsetSchedulable,
					Status: pick(r, corev1.ConditionFalse, corev1.ConditionTrue), LastTransitionTime: metav1.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC)}}
			}
			if chance(r, 0.3) {
				st.CreatingPods = map[string]metav1.Time{"web-other": metav1.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC)}
			}
			if pod.Name != "" && chance(r, 0.1) {
				st.DeletingPods = map[string]metav1.Time{pod.Name: metav1.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC)}
			}
			out = append(out, st)
		}
		if len(out) > 0 && chance(r, 0.1) {
			out = out[:len(out)-1] // a subset added since the controller last wrote
		}
		return out
	}
	status := appsv1alpha1.WorkloadSpreadStatus{ObservedGeneration: 1, SubsetStatuses: statuses()}
	status.VersionedSubsetStatuses = map[string][]appsv1alpha1.WorkloadSpreadSubsetStatus{}
	for _, version := range subset(r, 0.6, "versionIgnored", "6d8f9", "old42") {
		status.VersionedSubsetStatuses[version] = statuses()
	}
	return status
}

var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// normaliseGeneratedUIDs replaces the UUIDs in a status's keys and values by "UID": WorkloadSpread
// records a Pod without a name under a random UUID on either side.
func normaliseGeneratedUIDs(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[uuidPattern.ReplaceAllString(k, "UID")] = normaliseGeneratedUIDs(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normaliseGeneratedUIDs(x)
		}
		return out
	case string:
		return uuidPattern.ReplaceAllString(v, "UID")
	}
	return v
}

// The uid a pod without a name is recorded under is random on both sides.
func init() {
	normalisations = append(normalisations, struct {
		name, reason string
		apply        func(obj map[string]any)
	}{
		"matched-workloadspread uid",
		"the id WorkloadSpread records a Pod without a name under: a random UUID on both sides",
		func(obj map[string]any) {
			annotations, _ := dig(obj, "metadata", "annotations").(map[string]any)
			if text, ok := annotations["apps.kruise.io/matched-workloadspread"].(string); ok && strings.Contains(text, `"uid"`) {
				annotations["apps.kruise.io/matched-workloadspread"] = uuidPattern.ReplaceAllString(text, "UID")
			}
		},
	})
}

// genWorkloadSpreadDeletionCase: the "workloadspread-deletion" family, a Pod DELETE or eviction
// through Kruise's /validate-pod of a pod a WorkloadSpread may have given a subset (its
// matched-workloadspread annotation naming a subset, another, a missing WorkloadSpread, or text that
// does not parse): the deletingPods record Kruise writes is compared with ours (writes.go).
func genWorkloadSpreadDeletionCase(r *rand.Rand, _ int) (*Case, error) {
	cluster := namespaceObjects()
	gates := map[string]bool{}
	if chance(r, 0.03) {
		gates["WorkloadSpread"] = false
	}
	owner := pick(r, wsOwners[:6]...)
	labels := randomLabels(r)
	workloadName := "web"
	if owner[1] == "ReplicaSet" {
		workloadName = "web-6d8f9"
		labels["pod-template-hash"] = pick(r, "6d8f9", "old42")
	}
	name := "web-" + pick(r, "x7k2p", "q9z4m")
	if owner[1] == "StatefulSet" {
		name = fmt.Sprintf("web-%d", r.Intn(12))
	}
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: wsNamespace, Labels: labels, UID: types.UID("uid-" + name), ResourceVersion: "9"},
		Spec:       podSpec(r),
		Status:     corev1.PodStatus{Phase: pick(r, corev1.PodRunning, corev1.PodRunning, corev1.PodPending, corev1.PodFailed)},
	}
	if chance(r, 0.95) {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: owner[0], Kind: owner[1], Name: workloadName,
			UID: types.UID("owner-uid"), Controller: ptr.To(true)}}
	}
	if chance(r, 0.9) {
		pod.Annotations = map[string]string{"apps.kruise.io/matched-workloadspread": pick(r,
			`{"name":"spread-0","subset":"subset-a"}`, `{"name":"spread-0","subset":"subset-b"}`,
			`{"name":"spread-0","subset":"subset-c"}`, `{"name":"spread-0","subset":"subset-z"}`,
			`{"name":"spread-0","subset":"subset-a","uid":"0b1c2d3e-0000-4000-8000-000000000001"}`,
			`{"name":"gone","subset":"subset-a"}`, `{"Name":"spread-0","SUBSET":"subset-a"}`, `null`, `not json`, `{"name":1}`)}
	}
	cluster = append(cluster, wsWorkloads(r, owner)...)
	if chance(r, 0.9) {
		ws := genWorkloadSpread(r, "spread-0", owner, pod)
		if chance(r, 0.3) {
			// Recorded already: a deletion retried, or a pod still being created.
			for version, statuses := range ws.Status.VersionedSubsetStatuses {
				for i := range statuses {
					if chance(r, 0.5) {
						statuses[i].DeletingPods = map[string]metav1.Time{name: metav1.Date(2024, 5, 1, 11, 0, 0, 0, time.UTC)}
					}
				}
				ws.Status.VersionedSubsetStatuses[version] = statuses
			}
		}
		cluster = append(cluster, toMap(ws))
	}
	var req admissionv1.AdmissionRequest
	dryRun := chance(r, 0.1)
	note := "delete"
	if chance(r, 0.5) {
		req = request(r, admissionv1.Delete, "", "v1", "Pod", "pods", wsNamespace, name, nil, pod)
		if dryRun {
			optionsWithDryRun(&req, "DeleteOptions")
		}
	} else {
		if chance(r, 0.95) {
			cluster = append(cluster, toMap(pod))
		}
		eviction := &policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: wsNamespace}}
		evictionDryRun := chance(r, 0.15)
		if evictionDryRun {
			eviction.DeleteOptions = &metav1.DeleteOptions{DryRun: []string{"All"}}
		}
		req = request(r, admissionv1.Create, "policy", "v1", "Eviction", "pods", wsNamespace, name, eviction, nil)
		req.Resource = metav1.GroupVersionResource{Group: "", Version: "v1", Resource: "pods"}
		req.SubResource = "eviction"
		if dryRun {
			optionsWithDryRun(&req, "CreateOptions")
		}
		note = fmt.Sprintf("evict (deleteOptions.dryRun %t)", evictionDryRun)
	}
	kruiseutil.GlobalCache.Replace(nil, "")
	return &Case{Chain: []hook{validating("/validate-pod")}, Cluster: cluster, Gates: gates, Request: req,
		Note: fmt.Sprintf("%s of %q owned by %s (dry run %t)", note, name, owner[1], dryRun)}, nil
}
