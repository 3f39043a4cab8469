package main

// Building blocks the generators share: random choices, objects as the API server encodes them, and
// objects as Kruise stores them (through its own mutating and validating webhooks).

import (
	"encoding/json"
	"fmt"
	"math/rand"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
)

func pick[T any](r *rand.Rand, options ...T) T { return options[r.Intn(len(options))] }

func chance(r *rand.Rand, p float64) bool { return r.Float64() < p }

// subset returns each option with probability p, in order.
func subset[T any](r *rand.Rand, p float64, options ...T) []T {
	var out []T
	for _, o := range options {
		if chance(r, p) {
			out = append(out, o)
		}
	}
	return out
}

func intOrPercent(r *rand.Rand, ints []int, percents []string) *intstr.IntOrString {
	if chance(r, 0.5) {
		v := intstr.FromInt32(int32(pick(r, ints...)))
		return &v
	}
	v := intstr.FromString(pick(r, percents...))
	return &v
}

// toMap is an object as JSON sees it: the API server's typed encoding (omitempty fields absent).
func toMap(obj any) map[string]any {
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		panic(err)
	}
	return m
}

func rawOf(obj any) runtime.RawExtension {
	if obj == nil {
		return runtime.RawExtension{}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(err)
	}
	return runtime.RawExtension{Raw: raw}
}

// request builds the AdmissionRequest kube-apiserver sends: uid, kind, resource, names, user.
func request(r *rand.Rand, op admissionv1.Operation, group, version, kind, resource, namespace, name string, object, old any) admissionv1.AdmissionRequest {
	req := admissionv1.AdmissionRequest{
		UID:       types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", r.Int63n(1e12))),
		Kind:      metav1.GroupVersionKind{Group: group, Version: version, Kind: kind},
		Resource:  metav1.GroupVersionResource{Group: group, Version: version, Resource: resource},
		Name:      name,
		Namespace: namespace,
		Operation: op,
		UserInfo:  authenticationv1.UserInfo{Username: pick(r, "system:serviceaccount:kube-system:replicaset-controller", "alice")},
		Object:    rawOf(object),
		OldObject: rawOf(old),
	}
	req.RequestKind, req.RequestResource = &req.Kind, &req.Resource
	req.DryRun = new(bool)
	// kube-apiserver always sends the operation's options (Kruise's WorkloadSpread step decodes them).
	options := map[admissionv1.Operation]string{admissionv1.Create: "CreateOptions", admissionv1.Update: "UpdateOptions", admissionv1.Delete: "DeleteOptions"}
	if kind, ok := options[op]; ok {
		req.Options = rawOf(map[string]string{"apiVersion": "meta.k8s.io/v1", "kind": kind})
	}
	return req
}

var (
	podLabelKeys   = []string{"app", "tier", "track"}
	podLabelValues = map[string][]string{"app": {"web", "api"}, "tier": {"front", "back"}, "track": {"stable", "canary"}}
	namespaces     = []string{"default", "shop", "batch"}
	nsLabels       = map[string]map[string]string{
		"default": {"kubernetes.io/metadata.name": "default"},
		"shop":    {"kubernetes.io/metadata.name": "shop", "env": "prod"},
		"batch":   {"kubernetes.io/metadata.name": "batch", "env": "dev"},
	}
)

func namespaceObjects() []map[string]any {
	var out []map[string]any
	for _, ns := range namespaces {
		out = append(out, toMap(&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: nsLabels[ns], UID: types.UID("ns-" + ns), ResourceVersion: "1"},
			Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceActive},
		}))
	}
	return out
}

func randomLabels(r *rand.Rand) map[string]string {
	labels := map[string]string{}
	for _, k := range podLabelKeys {
		if chance(r, 0.7) {
			labels[k] = pick(r, podLabelValues[k]...)
		}
	}
	return labels
}

// appContainer is a container a workload's author writes: image, maybe env, ports, mounts, resources.
func appContainer(r *rand.Rand, name string, volumes []string) corev1.Container {
	c := corev1.Container{Name: name, Image: pick(r, "nginx:1.25", "registry.example/app:v2", "busybox")}
	if chance(r, 0.5) {
		c.Env = append(c.Env, corev1.EnvVar{Name: "LOG_LEVEL", Value: pick(r, "info", "debug")})
	}
	if chance(r, 0.3) {
		c.Env = append(c.Env, corev1.EnvVar{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}})
	}
	if chance(r, 0.4) {
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
	}
	for _, v := range volumes {
		if chance(r, 0.6) {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v, MountPath: "/mnt/" + v})
		}
	}
	if chance(r, 0.5) {
		c.Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: pick(r, resourceQuantities("100m", "1")...), corev1.ResourceMemory: pick(r, resourceQuantities("64Mi", "1Gi")...),
		}}
		if chance(r, 0.5) { // a limit at or above the request, as validation requires
			c.Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: pick(r, resourceQuantities("2", "4")...)}
		}
	}
	return c
}

// podSpec is a pod template's spec; defaulted when the API server would have defaulted it (a Pod
// created through the API always is; the flag also covers decoded objects that never were).
func podSpec(r *rand.Rand) corev1.PodSpec {
	volumes := subset(r, 0.4, "data", "config", "logs")
	spec := corev1.PodSpec{}
	for _, v := range volumes {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: v, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	n := 1 + r.Intn(2)
	for i := 0; i < n; i++ {
		spec.Containers = append(spec.Containers, appContainer(r, fmt.Sprintf("app%d", i), volumes))
	}
	if chance(r, 0.2) {
		spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"true"}}}
	}
	if chance(r, 0.3) {
		spec.ServiceAccountName = "runner"
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "kube-api-access-abcde", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}},
		}}})
		for i := range spec.Containers {
			spec.Containers[i].VolumeMounts = append(spec.Containers[i].VolumeMounts, corev1.VolumeMount{
				Name: "kube-api-access-abcde", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true})
		}
	}
	return spec
}

func defaultPod(pod *corev1.Pod) { corev1defaults.SetObjectDefaults_Pod(pod) }

func resourceQuantities(values ...string) []resource.Quantity {
	out := make([]resource.Quantity, len(values))
	for i, v := range values {
		out[i] = resource.MustParse(v)
	}
	return out
}
