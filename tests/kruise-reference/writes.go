package main

// Status writes, compared for any kind: what Kruise's handlers wrote into the fake client's objects'
// status during a case, against the `writes` our dry-run lists (the whole object as it would be
// written; its status is compared). Both statuses pass through the object's Go type, so they are
// encoded alike, and timestamps from the clock (Kruise's time.Now, our --now) are normalised.

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Write is one object's status as a side effect of the case left it.
type Write struct {
	APIVersion, Kind, Namespace, Name string
	Status                            any
}

func (w Write) key() string {
	return fmt.Sprintf("%s %s %s/%s", w.APIVersion, w.Kind, w.Namespace, w.Name)
}

// typedStatus is the status of obj encoded through its Go type (nil when it has none).
func typedStatus(obj map[string]any) (any, error) {
	typed, err := toTyped(obj)
	if err != nil {
		return nil, err
	}
	return statusOf(typed)
}

func statusOf(obj client.Object) (any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	return m["status"], nil
}

// kruiseWrites lists the objects of the case's cluster whose status in the fake client differs from
// the case's input: what Kruise's handlers wrote.
func kruiseWrites(cl client.Client, cluster []map[string]any) ([]Write, error) {
	var writes []Write
	for _, input := range cluster {
		before, err := typedStatus(input)
		if err != nil {
			return nil, err
		}
		stored, err := toTyped(input)
		if err != nil {
			return nil, err
		}
		key := client.ObjectKey{Namespace: stored.GetNamespace(), Name: stored.GetName()}
		if u, ok := stored.(*unstructured.Unstructured); ok {
			empty := &unstructured.Unstructured{}
			empty.SetGroupVersionKind(u.GroupVersionKind())
			stored = empty
		}
		if err := cl.Get(context.Background(), key, stored); err != nil {
			return nil, fmt.Errorf("reading %v %s back: %w", input["kind"], key, err)
		}
		after, err := statusOf(stored)
		if err != nil {
			return nil, err
		}
		if !reflect.DeepEqual(before, after) {
			apiVersion, _ := input["apiVersion"].(string)
			kind, _ := input["kind"].(string)
			writes = append(writes, Write{APIVersion: apiVersion, Kind: kind, Namespace: key.Namespace, Name: key.Name, Status: after})
		}
	}
	return writes, nil
}

// oursWrite is one entry of dry-run's `writes`.
type oursWrite struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Namespace  string         `json:"namespace"`
	Name       string         `json:"name"`
	Object     map[string]any `json:"object"`
}

func oursWrites(listed []oursWrite) ([]Write, error) {
	var writes []Write
	for _, w := range listed {
		status, err := typedStatus(w.Object)
		if err != nil {
			return nil, fmt.Errorf("our write of %s %s/%s: %w", w.Kind, w.Namespace, w.Name, err)
		}
		writes = append(writes, Write{APIVersion: w.APIVersion, Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, Status: status})
	}
	return writes, nil
}

// clockWindow: a timestamp within this of the case's clock came from the clock (Kruise's handlers
// run in the same seconds as the case starts; ours is given that second).
const clockWindow = time.Minute

// normaliseClock replaces every RFC 3339 string within clockWindow of now by "NOW".
func normaliseClock(v any, now time.Time) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[k] = normaliseClock(x, now)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normaliseClock(x, now)
		}
		return out
	case string:
		if t, err := time.Parse(time.RFC3339, v); err == nil && t.Sub(now).Abs() < clockWindow {
			return "NOW"
		}
	}
	return v
}

// normaliseWrites is writes with the clock's timestamps (see normaliseClock) and generated UUIDs
// (see normaliseGeneratedUIDs) normalised.
func normaliseWrites(writes []Write, now time.Time) []Write {
	out := make([]Write, 0, len(writes))
	for _, w := range writes {
		w.Status = normaliseGeneratedUIDs(normaliseClock(w.Status, now))
		out = append(out, w)
	}
	return out
}

// writesDifference says how two sides' (normalised) writes differ, or "" when they agree: compared
// as lists sorted by object.
func writesDifference(kruise, ours []Write) string {
	render := func(writes []Write) []string {
		var out []string
		for _, w := range writes {
			status, _ := json.Marshal(w.Status)
			out = append(out, w.key()+" status "+string(status))
		}
		sort.Strings(out)
		return out
	}
	k, o := render(kruise), render(ours)
	if reflect.DeepEqual(k, o) {
		return ""
	}
	return fmt.Sprintf("status writes:\n    Kruise [%s]\n    ours   [%s]", strings.Join(k, "; "), strings.Join(o, "; "))
}
