package main

// The deliberate deviations from Kruise, and the message rewrites that make wording comparable.
// Each deviation is one named class with its line in docs/differences.md (`doc` names that line);
// a disagreement that no class matches fails the run.

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
)

type deviation struct {
	name    string
	doc     string // text of its line in docs/differences.md (run.sh checks the page has it)
	matches func(c *Case, kruise, ours Outcome) bool
}

var deviations = []deviation{
	{
		name: "duplicate-sidecar-container",
		doc:  "**Duplicate container names.**",
		matches: func(c *Case, kruise, ours Outcome) bool {
			return c.Family == "pod" && kruise.Allowed && !ours.Allowed && hasDuplicateContainers(kruise.Object) &&
				(strings.Contains(ours.Message, "both inject a container named") || strings.Contains(ours.Message, "injects two containers named"))
		},
	},
	{
		name: "merge-patch-error-names-its-source",
		doc:  "**A MergePatchJson that cannot merge**",
		matches: func(c *Case, kruise, ours Outcome) bool {
			return c.Family == "pod" && !kruise.Allowed && !ours.Allowed && kruise.Code == ours.Code &&
				(kruise.Message == "Invalid JSON Patch" || kruise.Message == "Invalid JSON Document") &&
				strings.HasPrefix(ours.Message, "SidecarSet ") && strings.HasSuffix(ours.Message, ": "+kruise.Message)
		},
	},
	{
		name: "crd-cascading-without-gate",
		doc:  "**CRD `Cascading` works.**",
		matches: func(c *Case, kruise, ours Outcome) bool {
			return c.Family == "protection" && !c.Gates["DeletionProtectionForCRDCascadingGate"] &&
				kruise.Message == "feature-gate DeletionProtectionForCRDCascadingGate is not enabled"
		},
	},
	{
		name: "v1alpha1-namespace-mapped-at-admission",
		doc:  "No conversion webhook (`conversion: None`)",
		matches: func(c *Case, kruise, ours Outcome) bool {
			if c.Family != "sidecarset" || !kruise.Allowed || !ours.Allowed {
				return false
			}
			var stored map[string]any
			if json.Unmarshal(ours.Object, &stored) != nil || stored["apiVersion"] != "apps.kruise.io/v1alpha1" {
				return false
			}
			spec, _ := stored["spec"].(map[string]any)
			ns, _ := spec["namespace"].(string)
			mapped := map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}}
			if ns == "" || !reflect.DeepEqual(spec["namespaceSelector"], mapped) {
				return false
			}
			delete(spec, "namespaceSelector")
			withoutMapping, _ := json.Marshal(stored)
			return difference(kruise, Outcome{Allowed: true, Code: ours.Code, Object: withoutMapping}, "") == ""
		},
	},
	{
		name: "statefulset-inplaceonly-anchored",
		doc:  "The Advanced StatefulSet InPlaceOnly rule is anchored like CloneSet's",
		matches: func(c *Case, kruise, ours Outcome) bool {
			return c.Family == "statefulset" && kruise.Allowed && !ours.Allowed &&
				inPlaceOnlyNearImage.MatchString(ours.Message)
		},
	},
	{
		name: "eviction-dry-run-honoured",
		doc:  "**An eviction's own dry run is honoured.**",
		matches: func(c *Case, kruise, ours Outcome) bool {
			return (c.Family == "validate-pod" || c.Family == "workloadspread-deletion") && c.Request.SubResource == "eviction" && evictionIsDryRun(c.Request) &&
				decisionDifference(kruise, ours, "") == "" && len(kruise.Writes) > 0 && len(ours.Writes) == 0
		},
	},
	{
		name: "custom-workload-whitelist-error-wording",
		doc:  "**An unreadable custom-workload whitelist.**",
		matches: func(c *Case, kruise, ours Outcome) bool {
			// Our refusal of duplicate container names (step 3) comes before the whitelist is read (step 6).
			return c.Family == "pod" && !kruise.Allowed && !ours.Allowed && kruise.Code == 500 && ours.Code == 500 &&
				(strings.HasPrefix(kruise.Message, "json: ") || strings.Contains(kruise.Message, "JSON input") || strings.HasPrefix(kruise.Message, "invalid character")) &&
				(strings.HasPrefix(ours.Message, "kruise-configuration PPS_Watch_Custom_Workload_WhiteList: ") ||
					strings.Contains(ours.Message, "both inject a container named") || strings.Contains(ours.Message, "injects two containers named"))
		},
	},
	{
		name: "null-sidecar-update-state-is-no-record",
		doc:  "**A SidecarSet's `null` in-place update state is no record.**",
		matches: func(c *Case, kruise, ours Outcome) bool {
			return c.Family == "validate-pod" && kruise.Code == 500 &&
				strings.Contains(kruise.Message, "nil pointer dereference") && hasNullSidecarUpdateState(c)
		},
	},
	{
		name: "invalid-selector-reported-once",
		doc:  "An invalid `selector` is reported once",
		matches: func(c *Case, kruise, ours Outcome) bool {
			return !kruise.Allowed && !ours.Allowed && kruise.Code == ours.Code &&
				normaliseMessage(dropItem(kruise.Message, "spec.selector.selector: Invalid value: v1.LabelSelector{")) == normaliseMessage(ours.Message)
		},
	},
}

// evictionIsDryRun: the request is a dry run, or the Eviction's own deleteOptions say so (what
// `kubectl drain --dry-run=server` sends); Kruise reads neither on an eviction.
func evictionIsDryRun(req admissionv1.AdmissionRequest) bool {
	var eviction struct {
		DeleteOptions *struct{ DryRun []string } `json:"deleteOptions"`
	}
	_ = json.Unmarshal(req.Object.Raw, &eviction)
	return (req.DryRun != nil && *req.DryRun) || (eviction.DeleteOptions != nil && len(eviction.DeleteOptions.DryRun) > 0)
}

// hasNullSidecarUpdateState: a pod of the case (the request's, or one in the cluster) records a
// SidecarSet's in-place update state as null, on which Kruise's state check dereferences nil.
func hasNullSidecarUpdateState(c *Case) bool {
	pods := [][]byte{c.Request.Object.Raw, c.Request.OldObject.Raw}
	for _, obj := range c.Cluster {
		if obj["kind"] == "Pod" {
			raw, _ := json.Marshal(obj)
			pods = append(pods, raw)
		}
	}
	for _, raw := range pods {
		var pod struct {
			Metadata struct{ Annotations map[string]string }
		}
		if json.Unmarshal(raw, &pod) != nil {
			continue
		}
		var states map[string]*json.RawMessage
		if json.Unmarshal([]byte(pod.Metadata.Annotations["kruise.io/sidecarset-inplace-update-state"]), &states) != nil {
			continue
		}
		for _, state := range states {
			if state == nil || string(*state) == "null" {
				return true
			}
		}
	}
	return false
}

// inPlaceOnlyNearImage: our InPlaceOnly refusal of a change under a path Kruise's unanchored pattern
// takes for an image (`/containers/N/image` followed by more: imagePullPolicy).
var inPlaceOnlyNearImage = regexp.MustCompile(`^invalid template modified with InPlaceOnly strategy: \w+ /containers/\d+/image\w+, currently only image update is allowed for InPlaceOnly$`)

// hasDuplicateContainers: the stored pod has two containers (or init containers) of one name, which
// the API server's validation then refuses.
func hasDuplicateContainers(object []byte) bool {
	var pod struct {
		Spec struct {
			Containers, InitContainers []struct{ Name string }
		}
	}
	if json.Unmarshal(object, &pod) != nil {
		return false
	}
	seen := map[string]bool{}
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if seen[c.Name] {
			return true
		}
		seen[c.Name] = true
	}
	return false
}

// dropItem removes from an aggregated field-error message ("[a, b, c]", or one error alone) the
// item that starts with prefix and runs to the brace that closes the Go value it opens.
func dropItem(message, prefix string) string {
	start := strings.Index(message, prefix)
	if start < 0 {
		return message
	}
	depth, end := 0, -1
	for i := start + len(prefix) - 1; i < len(message); i++ {
		switch message[i] {
		case '{':
			depth++
		case '}':
			depth--
		}
		if depth == 0 {
			end = i + 1
			break
		}
	}
	if end < 0 {
		return message
	}
	switch {
	case strings.HasSuffix(message[:start], ", "):
		message = message[:start-2] + message[end:]
	case strings.HasPrefix(message[end:], ", "):
		message = message[:start] + message[end+2:]
	default:
		message = message[:start] + message[end:]
	}
	// An aggregate of one error is printed without brackets.
	if strings.HasPrefix(message, "[") && strings.HasSuffix(message, "]") && !strings.Contains(message, ", spec") {
		message = message[1 : len(message)-1]
	}
	return message
}

// messageRewrites make messages comparable where the difference is how a value is printed. Each is
// applied to both sides' messages.
var messageRewrites = []struct {
	pattern *regexp.Regexp
	replace string
	reason  string
}{
	{regexp.MustCompile(`intstr\.IntOrString\{Type:0, IntVal:(-?\d+), StrVal:""\}`), `$1`,
		"Kruise prints a bad value with Go's %#v, we print it as JSON (docs/differences.md, SidecarSet admission)"},
	{regexp.MustCompile(`intstr\.IntOrString\{Type:1, IntVal:0, StrVal:("[^"]*")\}`), `$1`, "the same, for a percentage"},
	{regexp.MustCompile(`\[\][\w.]+\(nil\)`), `"null"`, "the same, for a nil list (printed as the value null)"},
	{regexp.MustCompile(`\[\]string\{([^}]*)\}`), `[$1]`, "the same, for a list of strings"},
	{regexp.MustCompile(`("[^"]*"), `), `$1,`, "JSON lists have no space after the comma"},
}

func normaliseMessage(message string) string {
	for _, r := range messageRewrites {
		message = r.pattern.ReplaceAllString(message, r.replace)
	}
	return strings.TrimSpace(collapseStructValues(message))
}

// collapseStructValues replaces a struct shown as a bad value (`Invalid value: v1beta1.X{...}` from
// Go's %#v, pointer addresses included; `Invalid value: {...}` as our JSON) with `{…}`: the same
// value printed two ways (docs/differences.md, SidecarSet admission: values shown as compact JSON).
func collapseStructValues(message string) string {
	const marker = "Invalid value: "
	var out strings.Builder
	for {
		i := strings.Index(message, marker)
		if i < 0 {
			break
		}
		out.WriteString(message[:i+len(marker)])
		message = message[i+len(marker):]
		j := 0
		for j < len(message) && (message[j] == '.' || message[j] == '_' || message[j] >= '0' && message[j] <= '9' ||
			message[j] >= 'a' && message[j] <= 'z' || message[j] >= 'A' && message[j] <= 'Z') {
			j++
		}
		if j >= len(message) || message[j] != '{' || (j > 0 && !strings.Contains(message[:j], ".")) {
			continue
		}
		depth, end := 0, -1
		for k := j; k < len(message) && end < 0; k++ {
			switch message[k] {
			case '{':
				depth++
			case '}':
				depth--
				if depth == 0 {
					end = k + 1
				}
			}
		}
		if end < 0 {
			continue
		}
		out.WriteString("{…}")
		message = message[end:]
	}
	out.WriteString(message)
	return out.String()
}
