package main

// Kruise's side of a case: OpenKruise v1.9.1's own admission handlers, called the way kruise-manager's
// webhook server calls them (pkg/webhook/server.go: the HandlerGetterMap's getter, given the manager,
// wrapped in controller-runtime's admission.Webhook), over a fake client that holds the case's cluster
// objects with Kruise's scheme and the field indexes kruise-manager registers.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	appsv1alpha1 "github.com/openkruise/kruise/apis/apps/v1alpha1"
	appsv1beta1 "github.com/openkruise/kruise/apis/apps/v1beta1"
	policyv1alpha1 "github.com/openkruise/kruise/apis/policy/v1alpha1"
	"github.com/openkruise/kruise/pkg/control/pubcontrol"
	"github.com/openkruise/kruise/pkg/features"
	"github.com/openkruise/kruise/pkg/util"
	"github.com/openkruise/kruise/pkg/util/controllerfinder"
	utilfeature "github.com/openkruise/kruise/pkg/util/feature"
	"github.com/openkruise/kruise/pkg/util/fieldindex"
	kruisewebhook "github.com/openkruise/kruise/pkg/webhook"
)

// The scheme kruise-manager builds in its main.go: client-go's types, Kruise's three API groups, and
// (for the CRD webhook) apiextensions. Like its main, Kruise's apps groups also go into client-go's
// global scheme, whose codecs some of Kruise's helpers encode with (sidecarcontrol's patchCodec).
var scheme = func() *runtime.Scheme {
	utilruntime.Must(appsv1alpha1.AddToScheme(clientgoscheme.Scheme))
	utilruntime.Must(appsv1beta1.AddToScheme(clientgoscheme.Scheme))
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(appsv1alpha1.AddToScheme(s))
	utilruntime.Must(appsv1beta1.AddToScheme(s))
	utilruntime.Must(policyv1alpha1.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	s.AddUnversionedTypes(metav1.SchemeGroupVersion, &metav1.UpdateOptions{}, &metav1.DeleteOptions{}, &metav1.CreateOptions{})
	return s
}()

var codecs = serializer.NewCodecFactory(scheme)

// fakeManager is the manager a HandlerGetter is given. The getters of every webhook we compare read
// only GetClient and GetScheme; any other method panics (nil embedded interface), which the harness
// reports as a failure of the reference rather than a silent default.
type fakeManager struct {
	manager.Manager
	client client.Client
}

func (m fakeManager) GetClient() client.Client   { return m.client }
func (m fakeManager) GetScheme() *runtime.Scheme { return scheme }

// nameOrderedClient lists in name order. kruise-manager's informer cache lists in map order, so with
// several SidecarSets in one index bucket Kruise injects them in an order that varies from Pod to Pod;
// name order within each of its two lists (the Pod's namespace, then cluster-wide) is one of the
// orders it produces, and the one kruise-admission promises.
type nameOrderedClient struct{ client.Client }

func (c nameOrderedClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	sort.SliceStable(items, func(i, j int) bool {
		a, _ := meta.Accessor(items[i])
		b, _ := meta.Accessor(items[j])
		return a.GetNamespace()+"/"+a.GetName() < b.GetNamespace()+"/"+b.GetName()
	})
	return meta.SetList(list, items)
}

// newClient holds objects (typed through the scheme) with the field indexes kruise-manager registers
// (pkg/util/fieldindex.RegisterFieldIndexes) for the kinds these webhooks list.
func newClient(objects []map[string]any) (client.Client, error) {
	typed := make([]client.Object, 0, len(objects))
	for _, o := range objects {
		obj, err := toTyped(o)
		if err != nil {
			return nil, err
		}
		typed = append(typed, obj)
	}
	owner := func(obj client.Object) []string {
		var uids []string
		for _, ref := range obj.GetOwnerReferences() {
			uids = append(uids, string(ref.UID))
		}
		return uids
	}
	// The fake client's REST mapper knows the scheme's kinds; custom resources (Widgets under a
	// Cascading CRD) are added, as discovery would find them in a cluster.
	mapper := meta.NewDefaultRESTMapper(nil)
	for gvk := range scheme.AllKnownTypes() {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	for _, obj := range typed {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			mapper.Add(u.GroupVersionKind(), meta.RESTScopeNamespace)
		}
	}
	c := fake.NewClientBuilder().
		WithScheme(scheme).
		WithRESTMapper(mapper).
		WithObjects(typed...).
		// Status writes go through the status subresource, as in a cluster (pubcontrol's budget update).
		WithStatusSubresource(&policyv1alpha1.PodUnavailableBudget{}, &appsv1alpha1.WorkloadSpread{}).
		WithIndex(&appsv1alpha1.SidecarSet{}, fieldindex.IndexNameForSidecarSetNamespace, fieldindex.IndexSidecarSet).
		WithIndex(&appsv1beta1.SidecarSet{}, fieldindex.IndexNameForSidecarSetNamespace, fieldindex.IndexSidecarSetV1Beta1).
		WithIndex(&corev1.Pod{}, fieldindex.IndexNameForOwnerRefUID, owner).
		WithIndex(&corev1.PersistentVolumeClaim{}, fieldindex.IndexNameForOwnerRefUID, owner).
		WithIndex(&corev1.Pod{}, fieldindex.IndexNameForPodNodeName, func(obj client.Object) []string {
			return []string{obj.(*corev1.Pod).Spec.NodeName}
		}).
		Build()
	// Kruise's cache of the objects its webhooks wrote (PodUnavailableBudgets) starts empty: each
	// case is a cluster of its own.
	if err := util.GlobalCache.Replace(nil, ""); err != nil {
		return nil, err
	}
	return nameOrderedClient{c}, nil
}

// toTyped decodes a JSON object into the scheme's Go type for its apiVersion and kind; kinds the
// scheme does not know stay unstructured (custom resources under a Cascading CRD).
func toTyped(o map[string]any) (client.Object, error) {
	raw, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	obj, _, err := codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		if runtime.IsNotRegisteredError(err) {
			return &unstructured.Unstructured{Object: o}, nil
		}
		return nil, fmt.Errorf("cluster object %v: %w", o["kind"], err)
	}
	cobj, ok := obj.(client.Object)
	if !ok {
		return nil, fmt.Errorf("cluster object %v is not a client.Object", o["kind"])
	}
	return cobj, nil
}

// setGates sets Kruise's feature gates to its defaults (with SetDefaultFeatureGates' adjustments, as
// kruise-manager's main does after parsing its flags), then the case's own.
func setGates(gates map[string]bool) error {
	defaults := map[string]bool{}
	for name, spec := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if name != "AllAlpha" && name != "AllBeta" {
			defaults[string(name)] = spec.Default
		}
	}
	for name, value := range gates {
		defaults[name] = value
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(defaults); err != nil {
		return err
	}
	features.SetDefaultFeatureGates()
	return nil
}

// recoverPanics is controller-runtime's default (a handler's panic answers 500, as kruise-manager
// answers); -panics turns it off to see where one comes from.
var recoverPanics = true

// kruiseHandle runs one admission request through the handler Kruise registers at path.
func kruiseHandle(path string, c client.Client, req admissionv1.AdmissionRequest) (admission.Response, error) {
	getter, ok := kruisewebhook.HandlerMap[path]
	if !ok {
		return admission.Response{}, fmt.Errorf("Kruise registers no handler at %s", path)
	}
	// kruise-manager's controllerfinder.InitControllerFinder gives the finder the manager's client (and a
	// scale client for workloads of other kinds, which no case has).
	controllerfinder.Finder = &controllerfinder.ControllerFinder{Client: c}
	// kruise-manager's main gives pubcontrol the manager's client, the finder and an event recorder
	// (it records a refusal).
	pubcontrol.InitPubControl(c, controllerfinder.Finder, &record.FakeRecorder{})
	wh := &admission.Webhook{Handler: getter(fakeManager{client: c}), RecoverPanic: &recoverPanics}
	return wh.Handle(context.Background(), admission.Request{AdmissionRequest: req}), nil
}
