// Command kruise-reference runs random admission cases through OpenKruise v1.9.1's own handlers and
// through kruise-admission, and compares the decisions, codes, messages and stored objects.
//
//	kruise-reference -ours PATH [-seed N] [-cases N] [-family NAME,...] [-show N]
//
// Each case is generated from (family, seed, index) alone, so a failure replays with the same seed.
// Every disagreement must belong to one of the deviation classes in classes.go (each has its line
// in docs/differences.md); the command prints counts per family and class and exits 1 on any
// unclassified disagreement, 2 when it cannot run.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Case is one admission request and the cluster both sides see.
type Case struct {
	Family string
	Index  int
	// Kruise's webhooks the API server calls for this request, mutating ones first (each sees the
	// object as the previous left it, as kube-apiserver chains them), then validating ones.
	Chain   []hook
	Cluster []map[string]any
	Request admissionv1.AdmissionRequest
	// OursRequest, when set, is what our side is sent instead: the same change as it reaches a
	// cluster where kruise-admission serves and Kruise's workload defaulting does not run.
	OursRequest *admissionv1.AdmissionRequest
	Gates       map[string]bool // Kruise feature gates beyond its defaults
	// DecisionOnly compares the decision, code and message but not the stored object: for the
	// workloads, whose defaulting webhooks stay with Kruise (we serve their validation only).
	DecisionOnly bool
	Note         string // what the generator chose, for the report
	// Reference, when set, is the expected outcome from upstream code beside Kruise's webhooks (the
	// DaemonSet stamp); Chain is then empty.
	Reference func(client.Client) (Outcome, error)
}

type hook struct {
	path     string
	mutating bool
}

func mutating(path string) hook   { return hook{path, true} }
func validating(path string) hook { return hook{path, false} }

// A family generates its cases from a random source. reaches names what its cases must get Kruise
// to do, each as text that Kruise's stored object (or its writes, message or answer) then holds: a run of 200 cases or more that never
// reaches one fails, so the generators cannot quietly stop exercising it.
type family struct {
	name     string
	generate func(r *rand.Rand, index int) (*Case, error)
	reaches  map[string]string
}

func families() []family {
	return []family{
		{"pod", genPodCase, map[string]string{
			"sidecar injected":          "kruise.io/sidecarset-injected-list",
			"pinned revision injected":  "fluent-bit:1.9",
			"hot upgrade":               "kruise.io/sidecarset-working-hotupgrade-container",
			"patchPodMetadata":          "sidecar.example/injected",
			"SidecarSet init container": `"name":"init-`,
			"readiness gate":            "KruisePodReady",
			"launch barrier":            "KRUISE_CONTAINER_BARRIER",
			"related PUB":               "kruise.io/related-pub",
			"persistent pod state":      "kruise.io/injected-persistent-pod-state",
			"enhanced liveness probe":   "apps.kruise.io/container-probe-context",
			"serverless probe marker":   `"kruise.io/podprobe":`,
		}},
		{"sidecarset", genSidecarSetCase, map[string]string{
			"hash annotations":  "kruise.io/sidecarset-hash-without-image",
			"patchPodMetadata":  "patchPodMetadata",
			"hot upgrade":       "HotUpgrade",
			"resourcesPolicy":   "resourcesPolicy",
			"namespaceSelector": "namespaceSelector",
		}},
		{"cloneset", genCloneSetCase, map[string]string{"InPlaceOnly": "InPlaceOnly"}},
		{"statefulset", genStatefulSetCase, map[string]string{"InPlaceOnly": "InPlaceOnly"}},
		{"daemonset", genDaemonSetCase, map[string]string{"InPlaceIfPossible": "InPlaceIfPossible", "surge": "maxSurge"}},
		{"protection", genProtectionCase, nil},
		{"workloadspread", genWorkloadSpreadCase, map[string]string{
			"matched-workloadspread annotation": "apps.kruise.io/matched-workloadspread",
			"subset patched":                    "workloadspread.example/patched",
			"subset toleration":                 "zone-taint",
			"required node term":                "topology.kubernetes.io/zone",
			"preferred node term":               "node.example/pool",
			"sidecar after the patch":           `"name":"zone-agent"`,
			"generateName pod recorded by uid":  `\"uid\":`,
			"creatingPods written":              "creatingPods",
		}},
		{"workloadspread-deletion", genWorkloadSpreadDeletionCase, map[string]string{
			"deletingPods written":      "deletingPods",
			"eviction of a missing pod": `" not found`,
			"replicas path missing":     "not exists",
		}},
		{"stamp", genStampCase, map[string]string{"pinned": "metadata.name", "readiness gate": "KruisePodReady"}},
		{"validate-pod", genValidatePodCase, map[string]string{
			"allow":                     "answer: allowed",
			"refuse (spent budget)":     "pub unavailable allowed is negative",
			"write of disruptedPods":    `"disruptedPods":{`,
			"write of unavailablePods":  `"unavailablePods":{`,
			"eviction of a missing pod": `" not found`,
		}},
	}
}

func main() {
	oursBinary := flag.String("ours", "", "the kruise-admission binary")
	seed := flag.Int64("seed", 1, "random seed; the same seed generates the same cases")
	cases := flag.Int("cases", 1000, "cases per family")
	only := flag.String("family", "", "comma-separated families to run (default: all)")
	show := flag.Int("show", 5, "unclassified disagreements to print per family")
	reasons := flag.Bool("reasons", false, "print how often each of Kruise's refusals occurred, per family")
	panics := flag.Bool("panics", false, "let a panic in Kruise's handler stop the run with its stack")
	flag.Parse()
	recoverPanics = !*panics
	quietKlog() // Kruise's handlers log every refusal
	if *oursBinary == "" {
		fmt.Fprintln(os.Stderr, "kruise-reference: -ours PATH is required")
		os.Exit(2)
	}
	work, err := os.MkdirTemp("", "kruise-reference-")
	if err != nil {
		fatal(err)
	}
	workDir = work
	defer os.RemoveAll(work)
	side := ours{binary: *oursBinary, work: work}

	wanted := map[string]bool{}
	for _, name := range strings.Split(*only, ",") {
		if name != "" {
			wanted[name] = true
		}
	}
	fmt.Printf("kruise-reference: OpenKruise v1.9.1 against %s, seed %d, %d cases per family\n", *oursBinary, *seed, *cases)
	unclassified, unreached := 0, 0
	for _, fam := range families() {
		if len(wanted) > 0 && !wanted[fam.name] {
			continue
		}
		counts := map[string]int{}
		outcomes := map[string]int{}
		reached := map[string]int{}
		for what := range fam.reaches {
			reached[what] = 0
		}
		refusals := map[string]int{}
		shown := 0
		start := time.Now()
		for i := 0; i < *cases; i++ {
			// One source per case: a case replays from (seed, family, index) alone.
			r := rand.New(rand.NewSource(*seed*1_000_003 + int64(i)*7919 + int64(len(fam.name))))
			c, err := fam.generate(r, i)
			if err != nil {
				fatal(fmt.Errorf("%s case %d: generating: %w", fam.name, i, err))
			}
			c.Family, c.Index = fam.name, i
			class, detail, outcome, refusal, stored, err := runCase(c, side)
			if err != nil {
				fatal(fmt.Errorf("%s case %d (seed %d): %w", fam.name, i, *seed, err))
			}
			counts[class]++
			for what, text := range fam.reaches {
				if strings.Contains(string(stored), text) {
					reached[what]++
				}
			}
			outcomes[outcome]++
			if refusal != "" {
				refusals[refusal]++
			}
			if class == unclassifiedClass {
				unclassified++
				if shown < *show {
					shown++
					fmt.Printf("  UNCLASSIFIED %s case %d (seed %d; %s):\n    %s\n", fam.name, i, *seed, c.Note, detail)
				}
			}
		}
		fmt.Printf("%-12s %5d cases in %5.1fs (Kruise %.1fs, ours %.1fs): %s\n", fam.name, *cases,
			time.Since(start).Seconds(), kruiseTime.Seconds(), oursTime.Seconds(), summary(counts))
		fmt.Printf("%-12s Kruise's answers: %s\n", "", summary(outcomes))
		if len(reached) > 0 {
			fmt.Printf("%-12s reached: %s\n", "", summary(reached))
		}
		for what, n := range reached {
			if n == 0 && *cases >= 200 {
				unreached++
				fmt.Printf("  UNREACHED %s: no case got Kruise to do %q\n", fam.name, what)
			}
		}
		if *reasons {
			for _, line := range strings.Split(summary(refusals), ", ") {
				fmt.Printf("%-12s   refused: %s\n", "", line)
			}
		}
		kruiseTime, oursTime = 0, 0
	}
	if unclassified > 0 {
		_ = os.RemoveAll(work)
		fmt.Printf("%d unclassified disagreements (replay: -seed %d)\n", unclassified, *seed)
		os.Exit(1)
	}
	if unreached > 0 {
		fmt.Printf("%d things the generators never reached (seed %d)\n", unreached, *seed)
		os.Exit(1)
	}
	fmt.Println("no unclassified disagreements")
}

// runCase runs both sides and names the result: "agree", a deviation class, or unclassified; and
// what Kruise answered (denied, allowed unchanged, allowed changed), to show what the cases reach.
func runCase(c *Case, side ours) (class, detail, outcome, refusal string, stored []byte, err error) {
	now := time.Now()
	if err := setGates(c.Gates); err != nil {
		return "", "", "", "", nil, err
	}
	cl, err := newClient(c.Cluster)
	if err != nil {
		return "", "", "", "", nil, err
	}
	began := time.Now()
	var kruise Outcome
	if c.Reference != nil {
		kruise, err = c.Reference(cl)
	} else {
		kruise, err = kruiseChain(c, cl)
	}
	kruiseTime += time.Since(began)
	if err != nil {
		return "", "", "", "", nil, fmt.Errorf("Kruise's answer: %w", err)
	}
	if kruise.Writes, err = kruiseWrites(cl, c.Cluster); err != nil {
		return "", "", "", "", nil, fmt.Errorf("Kruise's writes: %w", err)
	}
	kruise.Writes = normaliseWrites(kruise.Writes, now)
	began = time.Now()
	mine, err := side.decide(c, now)
	oursTime += time.Since(began)
	if err != nil {
		return "", "", "", "", nil, err
	}
	outcome = "denied"
	if !kruise.Allowed {
		refusal = kruise.Message
		if len(refusal) > 90 {
			refusal = refusal[:90]
		}
	}
	if kruise.Allowed {
		outcome = "allowed unchanged"
		if !jsonEqual(kruise.Object, objectOf(c.Request)) {
			outcome = "allowed changed"
		}
	}
	// What the reaches are looked for in: the stored object, then Kruise's status writes, message
	// and answer.
	stored = fmt.Appendf(append([]byte(nil), kruise.Object...), "\nwrites: %s\nmessage: %s\nanswer: %s",
		writesDifference(nil, kruise.Writes), kruise.Message, outcome)
	if c.DecisionOnly {
		kruise.Object, mine.Object = nil, nil
	}
	diff := difference(kruise, mine, generateNameOf(c.Request))
	if diff == "" {
		return "agree", "", outcome, refusal, stored, nil
	}
	for _, d := range deviations {
		if d.matches(c, kruise, mine) {
			return d.name, diff, outcome, refusal, stored, nil
		}
	}
	return unclassifiedClass, diff, outcome, refusal, stored, nil
}

const unclassifiedClass = "UNCLASSIFIED"

// Time spent in each side's decisions (ours includes starting the process), for the report.
var kruiseTime, oursTime time.Duration

func summary(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		if (names[i] == "agree") != (names[j] == "agree") {
			return names[i] == "agree"
		}
		return names[i] < names[j]
	})
	parts := make([]string, 0, len(names))
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s %d", name, counts[name]))
	}
	return strings.Join(parts, ", ")
}

func quietKlog() {
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	_ = flags.Set("logtostderr", "false")
	_ = flags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)
	// controller-runtime logs a recovered handler panic with its stack; the run reports the 500.
	logf.SetLogger(logr.Discard())
	utilruntime.ReallyCrash = false
}

// workDir is removed on every exit, fatal ones included.
var workDir string

func fatal(err error) {
	if workDir != "" {
		_ = os.RemoveAll(workDir)
	}
	fmt.Fprintln(os.Stderr, "kruise-reference:", err)
	os.Exit(2)
}

// generateNameOf is the request object's generateName when it has no name yet.
func generateNameOf(req admissionv1.AdmissionRequest) string {
	var meta struct {
		Metadata struct{ Name, GenerateName string }
	}
	if json.Unmarshal(req.Object.Raw, &meta) != nil || meta.Metadata.Name != "" {
		return ""
	}
	return meta.Metadata.GenerateName
}
