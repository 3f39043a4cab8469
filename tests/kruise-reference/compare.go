package main

// What is compared, and the normalisations of stored objects applied before comparing: a generated
// Pod name (generatedName) and the list in `normalisations`. Everything else must be equal, or be one
// of the deviation classes in classes.go (which also holds the message rewrites).

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Outcome is one side's answer: the decision, its code and message, for an allowed request the
// object kube-apiserver would go on with (the request's object with the patch applied), and the
// status writes the request caused (writes.go).
type Outcome struct {
	Allowed bool
	Code    int32
	Message string
	Object  []byte
	Writes  []Write
}

// applyPatch applies a JSON patch the way kube-apiserver's mutating-webhook dispatcher does:
// evanphx/json-patch v4 (gopkg.in/evanphx/json-patch.v4), which is laxer than RFC 6902.
func applyPatch(object []byte, patch json.RawMessage) ([]byte, error) {
	if len(patch) == 0 || string(patch) == "null" || len(object) == 0 {
		return object, nil
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, fmt.Errorf("patch does not decode: %w", err)
	}
	out, err := p.Apply(object)
	if err != nil {
		return nil, fmt.Errorf("patch does not apply: %w", err)
	}
	return out, nil
}

// kruiseChain runs the case's chain of Kruise's webhooks as kube-apiserver does: each mutating
// webhook's patch (JSON patch) applied to the object the next one sees; then the validating ones on
// the final object, the first denial in order being the answer. A denial without a code is 403, as
// the API server reports it.
func kruiseChain(c *Case, cl client.Client) (Outcome, error) {
	req := c.Request
	object := objectOf(req)
	for _, h := range c.Chain {
		req.Object.Raw = object
		resp, err := kruiseHandle(h.path, cl, req)
		if err != nil {
			return Outcome{}, err
		}
		if !resp.Allowed {
			out := Outcome{Code: 403}
			if resp.Result != nil && resp.Result.Code != 0 {
				out.Code = resp.Result.Code
			}
			if resp.Result != nil {
				out.Message = resp.Result.Message
			}
			return out, nil
		}
		if h.mutating {
			if object, err = applyPatch(object, json.RawMessage(resp.Patch)); err != nil {
				return Outcome{}, fmt.Errorf("%s: %w", h.path, err)
			}
		}
	}
	return Outcome{Allowed: true, Code: 200, Object: object}, nil
}

// normalisations: differences that are not behaviour, each with its reason. Applied to both stored
// objects before they are compared.
var normalisations = []struct {
	name, reason string
	apply        func(obj map[string]any)
}{
	{
		"sidecarset-hash updateTimestamp",
		"the time a sidecar was injected: Kruise reads the wall clock, dry-run takes --now (set to the same second, which a slow case can cross)",
		func(obj map[string]any) {
			annotations, _ := dig(obj, "metadata", "annotations").(map[string]any)
			for _, key := range []string{"kruise.io/sidecarset-hash", "kruise.io/sidecarset-hash-without-image"} {
				text, ok := annotations[key].(string)
				if !ok {
					continue
				}
				var entries map[string]map[string]any
				if json.Unmarshal([]byte(text), &entries) != nil {
					continue
				}
				for _, entry := range entries {
					if _, ok := entry["updateTimestamp"]; ok {
						entry["updateTimestamp"] = "T"
					}
				}
				// Re-encoded canonically: both sides' key order is then the same too, and the order
				// of an annotation's JSON keys is not behaviour either.
				canonical, _ := json.Marshal(entries)
				annotations[key] = string(canonical)
			}
		},
	},
}

func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// generatedName: a Pod name made from generateName plus five random characters (Kruise makes one
// for launch priority; ours comes from the seeded random source, Kruise's from math/rand). Every
// occurrence in the stored object (its name, the barrier ConfigMap's name) is normalised.
var generatedName = regexp.MustCompile(`^[a-z0-9.-]*-[bcdfghjklmnpqrstvwxz2456789]{5}$`)

func normalised(object []byte, generateName string) (map[string]any, error) {
	if generateName != "" {
		var meta struct {
			Metadata struct{ Name string }
		}
		if json.Unmarshal(object, &meta) == nil && strings.HasPrefix(meta.Metadata.Name, generateName) &&
			len(meta.Metadata.Name) == len(generateName)+5 && generatedName.MatchString(meta.Metadata.Name) {
			object = []byte(strings.ReplaceAll(string(object), meta.Metadata.Name, generateName+"XXXXX"))
		}
	}
	var obj map[string]any
	if err := json.Unmarshal(object, &obj); err != nil {
		return nil, err
	}
	for _, n := range normalisations {
		n.apply(obj)
	}
	return obj, nil
}

// Difference says how two outcomes differ, or "" when they agree: the decision and stored object,
// then the status writes. generateName is the request's, for a name either side generated.
func difference(kruise, ours Outcome, generateName string) string {
	if d := decisionDifference(kruise, ours, generateName); d != "" {
		return d
	}
	return writesDifference(kruise.Writes, ours.Writes)
}

func decisionDifference(kruise, ours Outcome, generateName string) string {
	if kruise.Allowed != ours.Allowed {
		return fmt.Sprintf("decision: Kruise allowed=%t (%d %q), ours allowed=%t (%d %q)",
			kruise.Allowed, kruise.Code, kruise.Message, ours.Allowed, ours.Code, ours.Message)
	}
	if kruise.Code != ours.Code {
		return fmt.Sprintf("code: Kruise %d %q, ours %d %q", kruise.Code, kruise.Message, ours.Code, ours.Message)
	}
	if !kruise.Allowed {
		if normaliseMessage(kruise.Message) != normaliseMessage(ours.Message) {
			return fmt.Sprintf("message:\n    Kruise %q\n    ours   %q", kruise.Message, ours.Message)
		}
		return ""
	}
	if len(kruise.Object) == 0 && len(ours.Object) == 0 {
		return ""
	}
	k, err1 := normalised(kruise.Object, generateName)
	o, err2 := normalised(ours.Object, generateName)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("stored object does not decode: Kruise %v, ours %v", err1, err2)
	}
	if reflect.DeepEqual(k, o) {
		return ""
	}
	return "stored object: " + strings.Join(diffPaths("", k, o, 6), "; ")
}

// diffPaths lists up to limit JSON paths where a and b differ, with both values.
func diffPaths(path string, a, b any, limit int) []string {
	if reflect.DeepEqual(a, b) {
		return nil
	}
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := map[string]bool{}
		for k := range am {
			keys[k] = true
		}
		for k := range bm {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		var out []string
		for _, k := range sorted {
			out = append(out, diffPaths(path+"/"+k, am[k], bm[k], limit-len(out))...)
			if len(out) >= limit {
				break
			}
		}
		return out
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		var out []string
		for i := range al {
			out = append(out, diffPaths(fmt.Sprintf("%s/%d", path, i), al[i], bl[i], limit-len(out))...)
			if len(out) >= limit {
				break
			}
		}
		return out
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return []string{fmt.Sprintf("%s: Kruise %s, ours %s", path, clip(ja), clip(jb))}
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

func jsonEqual(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}
