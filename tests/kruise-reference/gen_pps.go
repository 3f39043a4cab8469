package main

// Steps 6 and 7 of /mutate-pod in the "pod" family: PersistentPodStates of the Pod's workload (required
// and preferred topology, with and without a state for the Pod, being deleted, another workload's), the
// custom-workload whitelist of kruise-configuration, and with their alpha gates on, the enhanced liveness
// probe and PodProbeMarkers on serverless Pods.

import (
	"fmt"
	"math/rand"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
)

// podSteps6And7 adds to the case what steps 6 and 7 read, and may name a CloneSet's Pod (as the
// CloneSet controller names its Pods) so that a state can be recorded for it.
func podSteps6And7(r *rand.Rand, ns string, owner [2]string, pod *corev1.Pod, gates map[string]bool, cluster []map[string]any) []map[string]any {
	if owner[1] == "CloneSet" && chance(r, 0.5) {
		pod.GenerateName, pod.Name = "", "web-0"
	}
	if chance(r, 0.2) { // what the recorded topology merges into
		pod.Spec.NodeSelector = map[string]string{"disk": "ssd", pick(r, "topology.kubernetes.io/zone", "rack"): "old"}
	}
	if chance(r, 0.15) { // a weight the generated states never use: Kruise and we both append after it
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 7, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "disk", Operator: corev1.NodeSelectorOpExists}}}},
		}}}
	}
	cluster = customWorkloadWhitelist(r, cluster)
	if chance(r, 0.6) {
		cluster = append(cluster, persistentPodStates(r, ns, owner)...)
	}
	if chance(r, 0.4) {
		gates["EnhancedLivenessProbe"] = true
	}
	if chance(r, 0.4) {
		gates["EnablePodProbeMarkerOnServerless"] = true
	}
	livenessProbes(r, pod)
	cluster = append(cluster, podProbeMarkers(r, ns, pod)...)
	return cluster
}

// customWorkloadWhitelist: sometimes kruise-configuration's PPS_Watch_Custom_Workload_WhiteList (in the
// ConfigMap the SidecarSet whitelist may have put there already), in Go's field names or lower case,
// rarely one Go cannot read (every Pod CREATE then fails).
func customWorkloadWhitelist(r *rand.Rand, cluster []map[string]any) []map[string]any {
	if !chance(r, 0.4) {
		return cluster
	}
	value := pick(r,
		`{"workloads":[{"Group":"apps.kruise.io","Version":"v1alpha1","Kind":"CloneSet"}]}`,
		`{"workloads":[{"group":"apps","version":"v1","kind":"ReplicaSet"},{"Group":"batch","Version":"v1","Kind":"Job"}]}`,
		`{"workloads":[{"Group":"apps.kruise.io","Kind":"CloneSet"},{"Group":"apps","Kind":"DaemonSet"}]}`,
		`{"workloads":null}`,
		`{}`)
	if chance(r, 0.05) {
		value = pick(r, `{"workloads":{}}`, `{"workloads":[`, `[]`)
	}
	for _, obj := range cluster {
		meta, _ := obj["metadata"].(map[string]any)
		if obj["kind"] == "ConfigMap" && meta["name"] == "kruise-configuration" {
			data, _ := obj["data"].(map[string]any)
			if data == nil {
				data = map[string]any{}
				obj["data"] = data
			}
			data["PPS_Watch_Custom_Workload_WhiteList"] = value
			return cluster
		}
	}
	return append(cluster, toMap(&corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: "kruise-configuration", Namespace: "kruise-system"},
		Data:       map[string]string{"PPS_Watch_Custom_Workload_WhiteList": value},
	}))
}

// persistentPodStates: up to three PersistentPodStates, mostly of the Pod's workload (any version of
// its group, sometimes another kind or name), some being deleted, recording node topology for web-0
// (the StatefulSet's and the named CloneSet's Pod) and others, with required and preferred keys that
// the state has labels for or not.
func persistentPodStates(r *rand.Rand, ns string, owner [2]string) []map[string]any {
	var out []map[string]any
	for _, name := range subset(r, 0.5, "pps-a", "pps-b", "pps-c") {
		apiVersion, kind := owner[0], owner[1]
		if kind == "" || chance(r, 0.2) {
			other := pick(r, [2]string{"apps/v1", "StatefulSet"}, [2]string{"apps.kruise.io/v1alpha1", "CloneSet"}, [2]string{"apps/v1", "ReplicaSet"})
			apiVersion, kind = other[0], other[1]
		} else if chance(r, 0.3) {
			apiVersion = pick(r, "apps/v1", "apps/v1beta2", "apps.kruise.io/v1alpha1", "apps.kruise.io/v1beta1", "batch/v1")
		}
		pps := &appsv1alpha1.PersistentPodState{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "PersistentPodState"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: appsv1alpha1.PersistentPodStateSpec{
				TargetReference: appsv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: pick(r, "web", "web", "web", "other")},
			},
		}
		if chance(r, 0.1) {
			pps.Namespace = pick(r, namespaces...)
		}
		if chance(r, 0.15) {
			// The fake client (like the API server) keeps an object being deleted only with a finalizer.
			pps.DeletionTimestamp = &metav1.Time{Time: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
			pps.Finalizers = []string{"example.io/hold"}
		}
		if chance(r, 0.6) {
			pps.Spec.RequiredPersistentTopology = &appsv1alpha1.NodeTopologyTerm{NodeTopologyKeys: subset(r, 0.5, "topology.kubernetes.io/zone", "kubernetes.io/hostname", "rack")}
		}
		for i := r.Intn(3); i > 0; i-- {
			pps.Spec.PreferredPersistentTopology = append(pps.Spec.PreferredPersistentTopology, appsv1alpha1.PreferredTopologyTerm{
				Weight:     int32(pick(r, 1, 50, 100)),
				Preference: appsv1alpha1.NodeTopologyTerm{NodeTopologyKeys: subset(r, 0.5, "topology.kubernetes.io/zone", "kubernetes.io/hostname", "rack")},
			})
		}
		if chance(r, 0.85) {
			pps.Status.PodStates = map[string]appsv1alpha1.PodState{}
			for _, pod := range subset(r, 0.6, "web-0", "web-1", "solo") {
				state := appsv1alpha1.PodState{NodeName: "node-1"}
				if chance(r, 0.85) {
					state.NodeTopologyLabels = map[string]string{}
					for _, key := range subset(r, 0.7, "topology.kubernetes.io/zone", "kubernetes.io/hostname") {
						state.NodeTopologyLabels[key] = fmt.Sprintf("%s-%d", pick(r, "z", "node"), r.Intn(3))
					}
				}
				pps.Status.PodStates[pod] = state
			}
		}
		out = append(out, toMap(pps))
	}
	return out
}

// livenessProbes: sometimes liveness probes (exec, HTTP, TCP, gRPC; timings set or not) on the Pod's
// containers, and the annotation that hands them to kruise-daemon.
func livenessProbes(r *rand.Rand, pod *corev1.Pod) {
	if !chance(r, 0.5) {
		return
	}
	for i := range pod.Spec.Containers {
		if chance(r, 0.6) {
			pod.Spec.Containers[i].LivenessProbe = randomProbe(r)
		}
	}
	if chance(r, 0.8) {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations["apps.kruise.io/using-enhanced-liveness"] = pick(r, "true", "true", "true", "false")
	}
}

func randomProbe(r *rand.Rand) *corev1.Probe {
	p := &corev1.Probe{}
	switch r.Intn(4) {
	case 0:
		p.Exec = &corev1.ExecAction{Command: []string{"/bin/sh", "-c", pick(r, "test -f /tmp/ok", "curl -s localhost:8080/healthz && echo <ok>")}}
	case 1:
		p.HTTPGet = &corev1.HTTPGetAction{Path: pick(r, "/healthz", "/ready?a=1&b=2"), Port: pick(r, intstr.FromInt32(8080), intstr.FromString("http"))}
		if chance(r, 0.3) {
			p.HTTPGet.HTTPHeaders = []corev1.HTTPHeader{{Name: "X-Probe", Value: "kruise"}}
		}
	case 2:
		p.TCPSocket = &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}
	case 3:
		p.GRPC = &corev1.GRPCAction{Port: 9090}
		if chance(r, 0.5) {
			p.GRPC.Service = ptr.To(pick(r, "", "health"))
		}
	}
	if chance(r, 0.5) {
		p.InitialDelaySeconds, p.PeriodSeconds = int32(pick(r, 0, 5)), int32(pick(r, 10, 30))
	}
	if chance(r, 0.2) {
		p.TerminationGracePeriodSeconds = ptr.To(int64(pick(r, 0, 30)))
	}
	return p
}

// podProbeMarkers: sometimes up to three PodProbeMarkers of the Pod's namespace whose selectors select
// it or not, with probes of its containers or of others, their condition types sometimes repeated or
// empty; sometimes the Pod already names markers in kruise.io/podprobemarker-list.
func podProbeMarkers(r *rand.Rand, ns string, pod *corev1.Pod) []map[string]any {
	if !chance(r, 0.4) {
		return nil
	}
	containers := []string{"other"}
	for _, c := range pod.Spec.Containers {
		containers = append(containers, c.Name)
	}
	var out []map[string]any
	for _, name := range subset(r, 0.6, "ppm-a", "ppm-b", "ppm-c") {
		ppm := &appsv1alpha1.PodProbeMarker{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps.kruise.io/v1alpha1", Kind: "PodProbeMarker"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       appsv1alpha1.PodProbeMarkerSpec{Selector: pubSelector(r, pod.Labels)},
		}
		if chance(r, 0.1) {
			ppm.Spec.Selector = nil
		}
		for i := 1 + r.Intn(2); i > 0; i-- {
			probe := appsv1alpha1.PodContainerProbe{
				Name:             pick(r, "healthy", "ready", "idle"),
				ContainerName:    pick(r, containers...),
				Probe:            appsv1alpha1.ContainerProbeSpec{Probe: *randomProbe(r)},
				PodConditionType: pick(r, "game.io/healthy", "game.io/idle", "game.io/ready", ""),
			}
			if chance(r, 0.5) {
				probe.MarkerPolicy = []appsv1alpha1.ProbeMarkerPolicy{{State: appsv1alpha1.ProbeSucceeded, Labels: map[string]string{"healthy": "true"}}}
			}
			ppm.Spec.Probes = append(ppm.Spec.Probes, probe)
		}
		out = append(out, toMap(ppm))
	}
	if chance(r, 0.15) {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations["kruise.io/podprobemarker-list"] = pick(r, "ppm-b", "ppm-c,ppm-a", "missing,ppm-a", "")
	}
	return out
}
