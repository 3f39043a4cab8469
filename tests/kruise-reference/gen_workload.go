package main

// The workload families: CloneSet, Advanced StatefulSet and Advanced DaemonSet CREATEs and edits.
// Kruise's side runs its defaulting webhook, then its validation, and the old object of an UPDATE is
// what Kruise stored (its defaulting applied). Our side serves validation only; it is sent the old
// object as Kruise stored it, or (half the time) as a cluster without Kruise's defaulting stores it:
// the decision must be Kruise's either way.

import (
	"encoding/json"
	"fmt"
	"math/rand"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	appspub "github.com/openkruise/kruise/apis/apps/pub"
	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
	appsv1beta1 "github.com/openkruise/kruise/apis/apps/v1beta1"
)

// workloadTemplate is a valid pod template whose labels the workload's selector selects.
func workloadTemplate(r *rand.Rand) corev1.PodTemplateSpec {
	spec := podSpec(r)
	if chance(r, 0.5) {
		defaultPod(&corev1.Pod{Spec: spec}) // Kruise's defaulting does it anyway; authors sometimes write them
	}
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: spec}
}

// editTemplate changes a template the ways people do: in place (image, metadata, resources) or not
// (env, pull policy, a new container), or writing out the defaults Kruise stores.
func editTemplate(r *rand.Rand, t *corev1.PodTemplateSpec) string {
	c := &t.Spec.Containers[0]
	switch r.Intn(9) {
	case 0:
		c.Image += "-new"
		return "image"
	case 1:
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		t.Annotations["release"] = "2"
		return "annotation"
	case 2:
		c.Env = append(c.Env, corev1.EnvVar{Name: "NEW", Value: "1"})
		return "env"
	case 3:
		c.ImagePullPolicy = pick(r, corev1.PullAlways, corev1.PullIfNotPresent)
		return "imagePullPolicy"
	case 4:
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		return "termination defaults"
	case 5:
		t.Spec.RestartPolicy = corev1.RestartPolicyAlways
		t.Spec.DNSPolicy = corev1.DNSClusterFirst
		return "pod defaults"
	case 6:
		c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: pick(r, resourceQuantities("150m", "300m")...)}
		return "cpu request"
	case 7:
		t.Spec.Containers = append(t.Spec.Containers, corev1.Container{Name: "extra", Image: "busybox"})
		return "new container"
	default:
		c.Image += "-new"
		c.Env = nil
		return "image and env"
	}
}

// workloadCase makes a CREATE or an UPDATE from the author's old and new objects.
func workloadCase(r *rand.Rand, chain []hook, group, version, kind, resource string, old, edited any, note string) (*Case, error) {
	cluster := namespaceObjects()
	ns := "shop"
	name := "web"
	if !chance(r, 0.6) {
		c := &Case{Chain: chain, Cluster: cluster, DecisionOnly: true, Note: "create " + note,
			Request: request(r, admissionv1.Create, group, version, kind, resource, ns, name, edited, nil)}
		return c, nil
	}
	// The old object as Kruise stored it: created through its defaulting.
	create := &Case{Chain: chain[:1], Cluster: cluster,
		Request: request(r, admissionv1.Create, group, version, kind, resource, ns, name, old, nil)}
	if err := setGates(nil); err != nil {
		return nil, err
	}
	cl, err := newClient(cluster)
	if err != nil {
		return nil, err
	}
	stored, err := kruiseChain(create, cl)
	if err != nil {
		return nil, err
	}
	var storedOld map[string]any
	if err := json.Unmarshal(stored.Object, &storedOld); err != nil {
		return nil, err
	}
	// The API server has set resourceVersion and generation on both before validation runs.
	storedOld["metadata"].(map[string]any)["resourceVersion"] = "5"
	storedOld["metadata"].(map[string]any)["generation"] = 1
	updated := toMap(edited)
	updated["metadata"].(map[string]any)["resourceVersion"] = "5"
	updated["metadata"].(map[string]any)["generation"] = 2
	c := &Case{Chain: chain, Cluster: cluster, DecisionOnly: true, Note: "update " + note,
		Request: request(r, admissionv1.Update, group, version, kind, resource, ns, name, updated, storedOld)}
	if chance(r, 0.5) {
		raw := toMap(old)
		raw["metadata"].(map[string]any)["resourceVersion"] = "5"
		raw["metadata"].(map[string]any)["generation"] = 1
		oursReq := c.Request
		oursReq.OldObject = rawOf(raw)
		c.OursRequest = &oursReq
		c.Note += " (ours: old object not defaulted)"
	}
	return c, nil
}

var cloneSetChain = []hook{mutating("/mutate-apps-kruise-io-v1alpha1-cloneset"), validating("/validate-apps-kruise-io-v1alpha1-cloneset")}

func genCloneSetCase(r *rand.Rand, _ int) (*Case, error) {
	cs := &appsv1alpha1.CloneSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "CloneSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: appsv1alpha1.CloneSetSpec{
			Replicas: ptr.To(int32(pick(r, 0, 3, 10))),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: workloadTemplate(r),
		},
	}
	cs.Spec.UpdateStrategy.Type = pick(r, appsv1alpha1.RecreateCloneSetUpdateStrategyType, appsv1alpha1.InPlaceIfPossibleCloneSetUpdateStrategyType, appsv1alpha1.InPlaceOnlyCloneSetUpdateStrategyType, "")
	if chance(r, 0.4) {
		cs.Spec.UpdateStrategy.Partition = intOrPercent(r, []int{0, 2, 20}, []string{"0%", "50%", "150%"})
	}
	if chance(r, 0.4) {
		cs.Spec.UpdateStrategy.MaxUnavailable = intOrPercent(r, []int{0, 1, 3}, []string{"0%", "20%"})
	}
	if chance(r, 0.4) {
		cs.Spec.UpdateStrategy.MaxSurge = intOrPercent(r, []int{0, 1}, []string{"0%", "50%"})
	}
	if chance(r, 0.2) {
		cs.Spec.ScaleStrategy.PodsToDelete = subset(r, 0.5, "web-a", "web-b", "web-a")
	}
	if chance(r, 0.2) {
		cs.Spec.ScaleStrategy.MaxUnavailable = intOrPercent(r, []int{0, 1}, []string{"10%"})
	}
	if chance(r, 0.2) {
		cs.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: appspub.InPlaceUpdateReady}}
	}
	edited := cs.DeepCopy()
	what := editTemplate(r, &edited.Spec.Template)
	if chance(r, 0.2) {
		edited.Spec.UpdateStrategy.Type = pick(r, appsv1alpha1.InPlaceOnlyCloneSetUpdateStrategyType, appsv1alpha1.RecreateCloneSetUpdateStrategyType)
		what += ", strategy " + string(edited.Spec.UpdateStrategy.Type)
	}
	if chance(r, 0.1) {
		edited.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web", "x": "y"}}
		edited.Spec.Template.Labels["x"] = "y"
		what += ", selector"
	}
	return workloadCase(r, cloneSetChain, "apps.kruise.io", "v1alpha1", "CloneSet", "clonesets", cs, edited,
		fmt.Sprintf("CloneSet %s: %s", cs.Spec.UpdateStrategy.Type, what))
}

var statefulSetChain = []hook{mutating("/mutate-apps-kruise-io-statefulset"), validating("/validate-apps-kruise-io-statefulset")}

func genStatefulSetCase(r *rand.Rand, _ int) (*Case, error) {
	sts := &appsv1beta1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: appsv1beta1.StatefulSetSpec{
			Replicas:    ptr.To(int32(pick(r, 0, 3))),
			Selector:    &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			ServiceName: "web",
			Template:    workloadTemplate(r),
		},
	}
	if chance(r, 0.8) {
		sts.Spec.UpdateStrategy.Type = pick(r, appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)
		if sts.Spec.UpdateStrategy.Type == "RollingUpdate" && chance(r, 0.8) {
			ru := &appsv1beta1.RollingUpdateStatefulSetStrategy{}
			ru.PodUpdatePolicy = pick(r, appsv1beta1.RecreatePodUpdateStrategyType, appsv1beta1.InPlaceIfPossiblePodUpdateStrategyType, appsv1beta1.InPlaceOnlyPodUpdateStrategyType, "")
			if chance(r, 0.4) {
				ru.Partition = ptr.To(int32(pick(r, 0, 1, 5)))
			}
			if chance(r, 0.4) {
				ru.MaxUnavailable = intOrPercent(r, []int{0, 1, 2}, []string{"0%", "50%"})
			}
			sts.Spec.UpdateStrategy.RollingUpdate = ru
		}
	}
	if chance(r, 0.5) {
		sts.Spec.Template.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: appspub.InPlaceUpdateReady}}
	}
	if chance(r, 0.2) {
		sts.Spec.PodManagementPolicy = pick(r, appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)
	}
	edited := sts.DeepCopy()
	what := editTemplate(r, &edited.Spec.Template)
	if chance(r, 0.1) {
		edited.Spec.ServiceName = "other"
		what += ", serviceName"
	}
	group, version, obj, objOld := "apps.kruise.io", "v1beta1", any(edited), any(sts)
	if chance(r, 0.3) {
		// The same object through v1alpha1 (the served version most manifests still name).
		a, b := &appsv1alpha1.StatefulSet{}, &appsv1alpha1.StatefulSet{}
		if err := a.ConvertFrom(edited.DeepCopy()); err == nil && b.ConvertFrom(sts.DeepCopy()) == nil {
			a.TypeMeta = metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "StatefulSet"}
			b.TypeMeta = a.TypeMeta
			version, obj, objOld = "v1alpha1", a, b
		}
	}
	return workloadCase(r, statefulSetChain, group, version, "StatefulSet", "statefulsets", objOld, obj,
		fmt.Sprintf("Advanced StatefulSet %s: %s", version, what))
}

var daemonSetChain = []hook{mutating("/mutate-apps-kruise-io-daemonset"), validating("/validate-apps-kruise-io-daemonset")}

func genDaemonSetCase(r *rand.Rand, _ int) (*Case, error) {
	ds := &appsv1beta1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: appsv1beta1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: workloadTemplate(r),
		},
	}
	types := []string{"Standard", "InPlaceIfPossible", "Surging", "Bogus", ""}
	if chance(r, 0.85) {
		ds.Spec.UpdateStrategy.Type = pick(r, appsv1beta1.RollingUpdateDaemonSetStrategyType, appsv1beta1.OnDeleteDaemonSetStrategyType)
		if chance(r, 0.8) {
			ru := &appsv1beta1.RollingUpdateDaemonSet{Type: appsv1beta1.RollingUpdateType(pick(r, types...))}
			if chance(r, 0.6) {
				ru.MaxUnavailable = intOrPercent(r, []int{0, 1, 2}, []string{"0%", "20%"})
			}
			if chance(r, 0.6) {
				ru.MaxSurge = intOrPercent(r, []int{0, 1}, []string{"0%", "10%"})
			}
			if chance(r, 0.2) {
				ru.Partition = intOrPercent(r, []int{0, 3}, []string{"50%"})
			}
			ds.Spec.UpdateStrategy.RollingUpdate = ru
		}
	}
	edited := ds.DeepCopy()
	what := editTemplate(r, &edited.Spec.Template)
	version, obj, objOld := "v1beta1", any(edited), any(ds)
	if chance(r, 0.4) {
		a, b := &appsv1alpha1.DaemonSet{}, &appsv1alpha1.DaemonSet{}
		if err := a.ConvertFrom(edited.DeepCopy()); err == nil && b.ConvertFrom(ds.DeepCopy()) == nil {
			a.TypeMeta = metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "DaemonSet"}
			b.TypeMeta = a.TypeMeta
			version, obj, objOld = "v1alpha1", a, b
		}
	}
	rolling := "none"
	if ds.Spec.UpdateStrategy.RollingUpdate != nil {
		rolling = string(ds.Spec.UpdateStrategy.RollingUpdate.Type)
	}
	return workloadCase(r, daemonSetChain, "apps.kruise.io", version, "DaemonSet", "daemonsets", objOld, obj,
		fmt.Sprintf("Advanced DaemonSet %s %s: %s", version, rolling, what))
}
