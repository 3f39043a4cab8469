package main

// SidecarSets as people write them, as Kruise stores them, and the "sidecarset" family: a SidecarSet
// CREATE or UPDATE through Kruise's defaulting (msidecarset) and then its validation (vsidecarset),
// beside the SidecarSets already stored.

import (
	"encoding/json"
	"fmt"
	"math/rand"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
	appsv1beta1 "github.com/openkruise/kruise/apis/apps/v1beta1"
)

var sidecarSetChain = []hook{mutating("/mutate-apps-kruise-io-sidecarset"), validating("/validate-apps-kruise-io-sidecarset")}

var sidecarNames = []string{"log-agent", "mesh-proxy", "metrics"}

// genSidecarSet writes a SidecarSet the way its author would, across the fields injection reads.
func genSidecarSet(r *rand.Rand, name string) *appsv1beta1.SidecarSet {
	s := &appsv1beta1.SidecarSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "SidecarSet"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}
	if chance(r, 0.3) {
		s.Labels = map[string]string{"team": "infra"}
	}
	if !chance(r, 0.05) { // a SidecarSet without a selector is refused
		selector := &metav1.LabelSelector{}
		if chance(r, 0.7) {
			k := pick(r, podLabelKeys...)
			selector.MatchLabels = map[string]string{k: pick(r, podLabelValues[k]...)}
		} else {
			k := pick(r, podLabelKeys...)
			selector.MatchExpressions = []metav1.LabelSelectorRequirement{{
				Key: k, Operator: pick(r, metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists),
			}}
			if selector.MatchExpressions[0].Operator != metav1.LabelSelectorOpExists {
				selector.MatchExpressions[0].Values = subset(r, 0.6, podLabelValues[k]...)
			}
		}
		s.Spec.Selector = selector
	}
	switch r.Intn(4) {
	case 0:
		s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": pick(r, namespaces...)}}
	case 1:
		s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": pick(r, "prod", "dev")}}
	}
	volumes := subset(r, 0.3, "sidecar-config", "data")
	for _, v := range volumes {
		vol := corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
		if v == "sidecar-config" {
			vol.VolumeSource = corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: name + "-config"}}}
		}
		s.Spec.Volumes = append(s.Spec.Volumes, vol)
	}
	n := 1 + r.Intn(2)
	for i := 0; i < n; i++ {
		s.Spec.Containers = append(s.Spec.Containers, sidecarContainer(r, fmt.Sprintf("%s-%d", pick(r, "agent", "proxy", name), i), volumes))
	}
	if chance(r, 0.25) {
		init := sidecarContainer(r, "init-"+name, volumes)
		init.PodInjectPolicy, init.UpgradeStrategy, init.TransferEnv = "", appsv1beta1.SidecarContainerUpgradeStrategy{}, nil
		if chance(r, 0.5) { // a native sidecar
			always := corev1.ContainerRestartPolicyAlways
			init.RestartPolicy = &always
		}
		s.Spec.InitContainers = []appsv1beta1.SidecarContainer{init}
		if chance(r, 0.8) { // Kruise cannot update init containers in place
			s.Spec.UpdateStrategy.Type = appsv1beta1.NotUpdateSidecarSetStrategyType
		}
	}
	if chance(r, 0.2) {
		s.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "registry-secret"}}
	}
	if chance(r, 0.3) {
		s.Spec.PatchPodMetadata = []appsv1beta1.SidecarSetPatchPodMetadata{{
			Annotations: map[string]string{pick(r, "sidecar.example/injected", "oom-score"): pick(r, "true", `{"a":1}`)},
			PatchPolicy: pick(r, appsv1beta1.SidecarSetRetainPatchPolicy, appsv1beta1.SidecarSetOverwritePatchPolicy, appsv1beta1.SidecarSetMergePatchJsonPatchPolicy, ""),
		}}
	}
	if chance(r, 0.1) {
		s.Spec.InjectionStrategy.Paused = true
	}
	if chance(r, 0.3) && s.Spec.UpdateStrategy.Type == "" {
		s.Spec.UpdateStrategy.Type = pick(r, appsv1beta1.NotUpdateSidecarSetStrategyType, appsv1beta1.RollingUpdateSidecarSetStrategyType)
		if chance(r, 0.5) {
			s.Spec.UpdateStrategy.Partition = intOrPercent(r, []int{0, 1, 5}, []string{"0%", "50%"})
		}
		if chance(r, 0.3) {
			s.Spec.UpdateStrategy.MaxUnavailable = intOrPercent(r, []int{0, 1, 2}, []string{"10%", "100%"})
		}
	}
	if chance(r, 0.15) {
		s.Spec.CustomVersion = pick(r, "v1", "v2")
	}
	return s
}

func sidecarContainer(r *rand.Rand, name string, volumes []string) appsv1beta1.SidecarContainer {
	c := appsv1beta1.SidecarContainer{Container: corev1.Container{Name: name, Image: pick(r, "fluent-bit:2.0", "envoy:1.30", "prom/statsd:v1")}}
	c.PodInjectPolicy = pick(r, appsv1beta1.BeforeAppContainerType, appsv1beta1.AfterAppContainerType, "")
	if chance(r, 0.4) {
		c.ShareVolumePolicy.Type = pick(r, appsv1beta1.ShareVolumePolicyEnabled, appsv1beta1.ShareVolumePolicyDisabled)
	}
	if chance(r, 0.3) {
		c.TransferEnv = []appsv1beta1.TransferEnvVar{{SourceContainerName: "app0", EnvName: pick(r, "LOG_LEVEL", "POD_IP", "MISSING")}}
	}
	if chance(r, 0.3) {
		c.Env = []corev1.EnvVar{{Name: "SIDECAR", Value: name}}
	}
	for _, v := range volumes {
		if chance(r, 0.5) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v, MountPath: "/sidecar/" + v})
		}
	}
	if chance(r, 0.1) {
		c.UpgradeStrategy = appsv1beta1.SidecarContainerUpgradeStrategy{UpgradeType: appsv1beta1.SidecarContainerHotUpgrade, HotUpgradeEmptyImage: "empty:1.0"}
	}
	if chance(r, 0.1) {
		c.ResourcesPolicy = &appsv1beta1.ResourcesPolicy{
			TargetContainersMode:      pick(r, appsv1beta1.TargetContainersModeSum, appsv1beta1.TargetContainersModeMax),
			TargetContainersNameRegex: ".*",
			ResourcesExpr:             appsv1beta1.ResourcesExpr{Limits: &appsv1beta1.ResourceExprLimits{CPU: pick(r, "50%", "max(cpu*50%, 50m)")}},
		}
	} else if chance(r, 0.4) {
		c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: pick(r, resourceQuantities("32Mi", "128Mi")...)}}
	}
	return c
}

// sidecarSetObject is how the SidecarSet reaches the API server: v1beta1, or (when it has the
// shape) v1alpha1 as Kruise's conversion writes it.
func sidecarSetObject(r *rand.Rand, s *appsv1beta1.SidecarSet) map[string]any {
	if chance(r, 0.3) {
		old := &appsv1alpha1.SidecarSet{}
		if err := old.ConvertFrom(s.DeepCopy()); err == nil {
			old.TypeMeta = metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "SidecarSet"}
			// v1alpha1's own way to scope to one namespace, which v1beta1 no longer has.
			if sel := old.Spec.NamespaceSelector; sel != nil && sel.MatchLabels["kubernetes.io/metadata.name"] != "" && chance(r, 0.7) {
				old.Spec.Namespace = sel.MatchLabels["kubernetes.io/metadata.name"]
				if chance(r, 0.8) {
					old.Spec.NamespaceSelector = nil
				}
			}
			return toMap(old)
		}
	}
	return toMap(s)
}

// storeSidecarSet creates obj through Kruise's chain beside the stored cluster objects and returns
// it as Kruise stores it (defaulted, hash annotations, v1beta1), or nil when Kruise refuses it.
func storeSidecarSet(r *rand.Rand, gates map[string]bool, cluster []map[string]any, obj map[string]any) (map[string]any, error) {
	name, _ := dig(obj, "metadata", "name").(string)
	c := &Case{Chain: sidecarSetChain, Cluster: cluster,
		Request: request(r, admissionv1.Create, "apps.kruise.io", apiVersionOf(obj), "SidecarSet", "sidecarsets", "", name, obj, nil)}
	if err := setGates(gates); err != nil {
		return nil, err
	}
	cl, err := newClient(cluster)
	if err != nil {
		return nil, err
	}
	out, err := kruiseChain(c, cl)
	if err != nil || !out.Allowed {
		return nil, err
	}
	stored := map[string]any{}
	if err := json.Unmarshal(out.Object, &stored); err != nil {
		return nil, err
	}
	// Stored and listed as the storage version, v1beta1 (the API server converts on read).
	if stored["apiVersion"] == "apps.kruise.io/v1alpha1" {
		old := &appsv1alpha1.SidecarSet{}
		if err := json.Unmarshal(out.Object, old); err != nil {
			return nil, err
		}
		hub := &appsv1beta1.SidecarSet{}
		if err := old.ConvertTo(hub); err != nil {
			return nil, err
		}
		hub.TypeMeta = metav1.TypeMeta{APIVersion: "apps.kruise.io/v1beta1", Kind: "SidecarSet"}
		stored = toMap(hub)
	}
	meta := stored["metadata"].(map[string]any)
	meta["uid"], meta["resourceVersion"], meta["generation"] = string(types.UID("uid-"+name)), "100", 1
	return stored, nil
}

func apiVersionOf(obj map[string]any) string {
	v, _ := obj["apiVersion"].(string)
	if v == "apps.kruise.io/v1alpha1" {
		return "v1alpha1"
	}
	return "v1beta1"
}

// storedSidecarSets: up to max SidecarSets, each created (in turn) beside the earlier ones.
func storedSidecarSets(r *rand.Rand, gates map[string]bool, cluster []map[string]any, max int) ([]map[string]any, []*appsv1beta1.SidecarSet, error) {
	n := r.Intn(max + 1)
	var authored []*appsv1beta1.SidecarSet
	for i := 0; i < n; i++ {
		name := pick(r, sidecarNames...) + fmt.Sprintf("-%d", i)
		s := genSidecarSet(r, name)
		stored, err := storeSidecarSet(r, gates, cluster, sidecarSetObject(r, s))
		if err != nil {
			return nil, nil, err
		}
		if stored != nil {
			cluster = append(cluster, stored)
			authored = append(authored, s)
		}
	}
	return cluster, authored, nil
}

// sidecarSetCluster: Namespaces, and what lets patchPodMetadata through Kruise's validation: the
// kruise-configuration whitelist, or the SidecarSetPatchPodMetadataDefaultsAllowed gate.
func sidecarSetCluster(r *rand.Rand) ([]map[string]any, map[string]bool) {
	cluster := namespaceObjects()
	gates := map[string]bool{}
	switch r.Intn(3) {
	case 0:
		gates["SidecarSetPatchPodMetadataDefaultsAllowed"] = true
	case 1:
		cluster = append(cluster, toMap(&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: "kruise-configuration", Namespace: "kruise-system"},
			Data: map[string]string{"SidecarSet_PatchPodMetadata_WhiteList": pick(r,
				`{"rules":[{"allowedAnnotationKeyExprs":["sidecar\\.example/.*","oom-score"]}]}`,
				`{"rules":[{"selector":{"matchLabels":{"team":"infra"}},"allowedAnnotationKeyExprs":[".*"]}]}`)},
		}))
	}
	return cluster, gates
}

func genSidecarSetCase(r *rand.Rand, _ int) (*Case, error) {
	base, gates := sidecarSetCluster(r)
	cluster, authored, err := storedSidecarSets(r, gates, base, 2)
	if err != nil {
		return nil, err
	}
	c := &Case{Chain: sidecarSetChain, Cluster: cluster, Gates: gates}
	if len(authored) > 0 && chance(r, 0.4) {
		// An UPDATE of a stored SidecarSet: the author's edit on top of what is stored.
		i := r.Intn(len(authored))
		old := cluster[len(cluster)-len(authored)+i]
		edited := authored[i].DeepCopy()
		edited.Spec.Containers[0].Image = pick(r, "fluent-bit:2.1", "envoy:1.31")
		if chance(r, 0.3) {
			edited.Spec.Selector = genSidecarSet(r, edited.Name).Spec.Selector
		}
		if chance(r, 0.2) {
			edited.Spec.Containers[0].Name += "-renamed"
		}
		obj := toMap(edited)
		obj["metadata"].(map[string]any)["resourceVersion"] = "100"
		c.Request = request(r, admissionv1.Update, "apps.kruise.io", "v1beta1", "SidecarSet", "sidecarsets", "", edited.Name, obj, old)
		c.Note = "update " + edited.Name
		return c, nil
	}
	s := genSidecarSet(r, pick(r, sidecarNames...)+"-new")
	obj := sidecarSetObject(r, s)
	c.Request = request(r, admissionv1.Create, "apps.kruise.io", apiVersionOf(obj), "SidecarSet", "sidecarsets", "", s.Name, obj, nil)
	c.Note = fmt.Sprintf("create %s (%s) beside %d", s.Name, apiVersionOf(obj), len(authored))
	return c, nil
}
