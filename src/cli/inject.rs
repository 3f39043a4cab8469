//! `kruise-admission inject`: SidecarSet injection applied to the pod templates of workload
//! manifests, like `istioctl kube-inject`, so a change can be reviewed (or applied) before any pod
//! is created.
//!
//! Each template becomes a Pod (the template's metadata and spec, in the object's namespace) that
//! goes through the very `/mutate-pod` webhook `serve` runs, as a CREATE. Only what injection
//! writes is copied back into the template: `spec.containers`, `spec.initContainers`,
//! `spec.volumes`, `spec.imagePullSecrets` and `metadata.annotations`. The DaemonSet-style stamp
//! (node affinity, tolerations, `nodeName`) is a per-pod scheduling decision made when a real pod
//! is created, so it is never written into a template. Everything else in a manifest is untouched.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{Map, Value};
use time::OffsetDateTime;

use super::cluster_folder;
use super::dry_run::parse_rfc3339;
use super::inputs::{self, bare_object};
use super::report::yaml;
use super::settings::DecisionArgs;
use crate::admission::pod::enhanced_liveness::CONTEXT_ANNOTATION;
use crate::admission::pod::launch_priority::BARRIER_ENV;
use crate::admission::pod::persistent_pod_state::INJECTED_ANNOTATION;
use crate::admission::pod::probe_marker::{LIST_ANNOTATION, PROBES_ANNOTATION};
use crate::admission::pod::related_pub::RELATED_PUB_ANNOTATION;
use crate::admission::review::Decision;
use crate::admission::webhooks;
use crate::admission::workload_spread::MATCHED_ANNOTATION;
use crate::admission::{FixedClock, Inputs, SeededRandom};
use crate::api::json::object_entry;
use crate::cluster::Answers;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// YAML documents separated by `---`.
    Yaml,
    /// One JSON document per line.
    Json,
}

#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("input").required(true).multiple(true))]
pub struct Args {
    /// Manifests to inject: a file, a folder (every .yaml/.yml/.json below, in path order) or `-`
    /// for standard input. JSON or multi-document YAML; `List` kinds keep their shape.
    #[arg(value_name = "FILE", group = "input")]
    pub inputs: Vec<String>,
    /// The same as a FILE argument, as `kubectl apply -f` takes it (repeatable; read before the
    /// FILE arguments).
    #[arg(short = 'f', long = "filename", value_name = "FILE", group = "input")]
    pub filename: Vec<String>,
    /// Folder of cluster objects (SidecarSets, Namespaces, ControllerRevisions, ...) the injection
    /// reads. Without it no SidecarSet exists and manifests come out unchanged.
    #[arg(long, value_name = "DIR")]
    pub cluster_dir: Option<PathBuf>,
    /// Objects (files or folders) layered over the `--cluster-dir` objects, as `kubectl apply`
    /// would store them (a SidecarSet gets its defaults and hash annotations; one Kruise would
    /// refuse is an error): a new SidecarSet, or a new version of one. Repeatable.
    #[arg(long = "with", value_name = "FILE")]
    pub with: Vec<PathBuf>,
    /// The time injection records (RFC 3339) where a template has no timestamp of its own for a
    /// SidecarSet. Without it, 1970-01-01T00:00:00Z, so the same input gives the same output.
    #[arg(long, value_name = "RFC3339", value_parser = parse_rfc3339)]
    pub now: Option<OffsetDateTime>,
    /// The namespace of manifests that name none (what `kubectl apply` would use; default
    /// `default`). A manifest that names another one is an error, as in kubectl.
    #[arg(short = 'n', long, value_name = "NS")]
    pub namespace: Option<String>,
    #[command(flatten)]
    pub decisions: DecisionArgs,
    /// Seed of the random source used for percentage partitions.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub seed: u64,
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Yaml)]
    pub output: Format,
}

/// The time injection records without `--now`: a fixed one, not the wall clock, so re-rendering
/// the same manifests (GitOps) gives the same bytes and `kubectl apply` rolls nothing. A template
/// already injected keeps the timestamp it carries (an unchanged entry keeps its time).
const DEFAULT_NOW: OffsetDateTime = OffsetDateTime::UNIX_EPOCH;

/// Where the pod template of each workload kind lives; `""` for a Pod itself.
fn template_pointer(object: &Value) -> Option<&'static str> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    match (group, object.get("kind")?.as_str()?) {
        ("", "Pod") => Some(""),
        ("apps", "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet")
        | ("batch", "Job")
        | ("apps.kruise.io", "CloneSet" | "StatefulSet" | "DaemonSet") => Some("/spec/template"),
        ("batch", "CronJob") => Some("/spec/jobTemplate/spec/template"),
        _ => None,
    }
}

/// Spec fields injection writes, copied from the mutated pod into the template.
const SPEC_FIELDS: &[&str] = &["containers", "initContainers", "volumes", "imagePullSecrets"];

/// Run `inject`. Exit status: 0 when every manifest was processed, 1 when the webhook refused a
/// template (that manifest is written unchanged and the reason goes to stderr), 2 when an input or
/// the cluster folder cannot be read, a folder SidecarSet would be refused, or a manifest names
/// another namespace than `--namespace`. A closed standard output ends it quietly with 0.
pub fn run(args: Args) -> ExitCode {
    let settings = match args.decisions.settings() {
        Ok(settings) => settings,
        Err(message) => {
            eprintln!("inject: {message}");
            return ExitCode::from(2);
        }
    };
    let clock = FixedClock(args.now.unwrap_or(DEFAULT_NOW));
    let random = SeededRandom::new(args.seed);
    let deciding = cluster_folder::Deciding { clock: &clock, random: &random, settings: &settings };
    let cluster = match cluster_folder::load("inject", args.cluster_dir.as_ref(), &args.with, &deciding) {
        Ok(cluster) => cluster,
        Err(message) => {
            eprintln!("inject: {message}");
            return ExitCode::from(2);
        }
    };
    let injector = Injector {
        inputs: Inputs {
            cluster: cluster.current(),
            answers: &Answers::default(),
            clock: &clock,
            random: &random,
            settings: &settings,
        },
        namespace: args.namespace.as_deref(),
    };

    let mut writer =
        Writer { out: BufWriter::new(std::io::stdout().lock()), format: args.output, first: true };
    let (mut refused, mut unreadable) = (false, false);
    for argument in args.filename.iter().chain(&args.inputs) {
        let files = match inputs::expand(argument) {
            Ok(files) => files,
            Err(message) => {
                eprintln!("inject: {argument}: {message}");
                unreadable = true;
                continue;
            }
        };
        for input in files {
            match inject_file(&injector, &input, &mut writer) {
                Ok(any_refused) => refused |= any_refused,
                Err(FileError::Unreadable(message)) => {
                    eprintln!("inject: {input}: {message}");
                    unreadable = true;
                }
                Err(FileError::Write(e)) => return write_failed(&e),
            }
        }
    }
    if let Err(e) = writer.out.flush() {
        return write_failed(&e);
    }
    if unreadable {
        ExitCode::from(2)
    } else if refused {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Standard output failed. A reader that went away (`inject … | head`) is not a failure: stop
/// quietly, as Unix tools do; anything else is (status 2).
fn write_failed(e: &std::io::Error) -> ExitCode {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        return ExitCode::SUCCESS;
    }
    eprintln!("inject: cannot write output: {e}");
    ExitCode::from(2)
}

/// Why a file's manifests were not all written.
enum FileError {
    /// The file cannot be read or parsed: nothing of it was written.
    Unreadable(String),
    /// Standard output failed: `inject` stops.
    Write(std::io::Error),
}

/// Inject every document of `input` and write it out: whether the webhook refused any.
fn inject_file(injector: &Injector, input: &str, writer: &mut Writer<impl Write>) -> Result<bool, FileError> {
    let documents = inputs::read_text(input).and_then(|text| parse(&text)).map_err(FileError::Unreadable)?;
    if let Some(namespace) = injector.namespace {
        documents.iter().try_for_each(|d| same_namespace(d, namespace)).map_err(FileError::Unreadable)?;
    }
    let mut refused = false;
    for (index, mut document) in documents.into_iter().enumerate() {
        refused |= !injector.object(&mut document, &format!("{input}#{index}"));
        writer.write(&document).map_err(FileError::Write)?;
    }
    Ok(refused)
}

/// kubectl's refusal of a manifest whose namespace is not the `--namespace` given (it never moves
/// an object silently), for the object and the items of a List.
fn same_namespace(object: &Value, namespace: &str) -> Result<(), String> {
    if let Some(items) = object.get("items").and_then(Value::as_array) {
        return items.iter().try_for_each(|item| same_namespace(item, namespace));
    }
    match object.pointer("/metadata/namespace").and_then(Value::as_str) {
        Some(own) if !own.is_empty() && own != namespace => Err(format!(
            "the namespace from the provided object \"{own}\" does not match the namespace \"{namespace}\". \
             You must pass '--namespace={own}' to perform this operation."
        )),
        _ => Ok(()),
    }
}

/// Standard output in the chosen format: YAML documents separated by `---`, or JSON lines.
struct Writer<W: Write> {
    out: W,
    format: Format,
    /// No document written yet (the first YAML document has no separator).
    first: bool,
}

impl<W: Write> Writer<W> {
    fn write(&mut self, document: &Value) -> std::io::Result<()> {
        let text = match self.format {
            Format::Yaml if self.first => yaml(document),
            Format::Yaml => format!("---\n{}", yaml(document)),
            Format::Json => format!("{document}\n"),
        };
        self.first = false;
        self.out.write_all(text.as_bytes())
    }
}

/// The documents of a manifest file, as written: `List` kinds are not flattened (their items are
/// injected in place). Errors name the document and say what was expected.
fn parse(text: &str) -> Result<Vec<Value>, String> {
    let documents: Vec<Value> = if text.trim_start().starts_with('{') {
        serde_json::Deserializer::from_str(text)
            .into_iter::<Value>()
            .enumerate()
            .map(|(i, v)| v.map_err(|e| format!("document {i}: invalid JSON: {e}")))
            .collect::<Result<_, _>>()?
    } else {
        serde_saphyr::from_multiple::<Value>(text).map_err(|e| format!("invalid YAML: {e}"))?
    };
    let documents: Vec<Value> = documents.into_iter().filter(|d| !d.is_null()).collect();
    if let Some(index) = documents.iter().position(|d| !d.is_object()) {
        return Err(format!("document {index} is not an object: expected a Kubernetes manifest"));
    }
    Ok(documents)
}

struct Injector<'a> {
    inputs: Inputs<'a>,
    /// `--namespace`: for manifests without a namespace (else `default`), and the only one a
    /// manifest may name.
    namespace: Option<&'a str>,
}

impl Injector<'_> {
    /// Inject `object` (and the items of a List) in place. False when the webhook refused.
    fn object(&self, object: &mut Value, source: &str) -> bool {
        if let Some(Value::Array(items)) = object.get_mut("items") {
            let mut ok = true;
            for (i, item) in items.iter_mut().enumerate() {
                ok &= self.object(item, &format!("{source}.items[{i}]"));
            }
            return ok;
        }
        let Some(pointer) = template_pointer(object) else { return true };
        let namespace = object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .or(self.namespace)
            .unwrap_or("default")
            .to_owned();
        let what = format!(
            "{} {namespace}/{}",
            object.get("kind").and_then(Value::as_str).unwrap_or_default(),
            object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
        );
        let Some(template) = object.pointer_mut(pointer).filter(|t| t.is_object()) else {
            eprintln!("inject: {source}: {what} has no pod template at {pointer}; left unchanged");
            return true;
        };
        let pod = if pointer.is_empty() { template.clone() } else { pod_of(template, &namespace) };
        let mut request = bare_object(pod, source);
        request.namespace = namespace;
        if let Some(warning) =
            cluster_folder::unknown_namespace(&request, self.inputs.cluster, self.inputs.settings)
        {
            eprintln!("inject: {source}: {what}: warning: {warning}");
        }
        let (decision, mutated) = mutate_pod(&request, &self.inputs);
        for warning in &decision.warnings {
            eprintln!("inject: {source}: {what}: warning: {warning}");
        }
        let Some(mutated) = mutated.filter(|_| decision.allowed) else {
            let message = decision.status.map(|s| format!("{} ({})", s.message, s.code)).unwrap_or_default();
            eprintln!("inject: {source}: {what}: refused, left unchanged: {message}");
            return false;
        };
        write_back(template, &mutated);
        true
    }
}

/// A Pod from a template: its metadata and spec, in the workload's namespace.
fn pod_of(template: &Value, namespace: &str) -> Value {
    let mut metadata = template.get("metadata").and_then(Value::as_object).cloned().unwrap_or_default();
    metadata.insert("namespace".into(), Value::String(namespace.to_owned()));
    let mut pod = Map::new();
    pod.insert("apiVersion".into(), Value::String("v1".into()));
    pod.insert("kind".into(), Value::String("Pod".into()));
    pod.insert("metadata".into(), Value::Object(metadata));
    pod.insert("spec".into(), template.get("spec").cloned().unwrap_or_else(|| Value::Object(Map::new())));
    Value::Object(pod)
}

/// Run the `/mutate-pod` webhook exactly as `serve` and `dry-run` do.
fn mutate_pod(
    request: &crate::admission::review::AdmissionRequest,
    inputs: &Inputs,
) -> (Decision<'static>, Option<Value>) {
    let Some(webhook) = webhooks::by_path("/mutate-pod") else { return (Decision::allow(), None) };
    let outcome = webhooks::run_offline(webhook, request, inputs);
    (outcome.decision, outcome.mutated)
}

/// Copy what injection writes from the mutated pod into `template` (a template or a Pod).
fn write_back(template: &mut Value, mutated: &Value) {
    if let Some(annotations) = mutated.pointer("/metadata/annotations").and_then(Value::as_object) {
        let own = template.pointer("/metadata/annotations").and_then(Value::as_object);
        let mut annotations = annotations.clone();
        keep_per_pod_annotations(&mut annotations, own);
        if !annotations.is_empty()
            && own != Some(&annotations)
            && let Some(target) = template.as_object_mut()
            && let Some(metadata) = object_entry(target, "metadata")
        {
            metadata.insert("annotations".into(), Value::Object(annotations));
        }
    }
    let (Some(spec), Some(new_spec)) =
        (template.get_mut("spec").and_then(Value::as_object_mut), mutated.get("spec"))
    else {
        return;
    };
    for field in SPEC_FIELDS {
        if let Some(value) = new_spec.get(*field)
            && spec.get(*field) != Some(value)
        {
            let mut value = value.clone();
            if *field == "containers" {
                drop_launch_barriers(&mut value, spec.get("containers"));
                keep_liveness_probes(&mut value, spec.get("containers"));
            }
            if spec.get(*field) != Some(&value) {
                spec.insert((*field).to_owned(), value);
            }
        }
    }
}

/// The annotations the other steps of `/mutate-pod` write, each about one Pod: the WorkloadSpread
/// subset it was counted in, the PodUnavailableBudget that selects it, the topology recorded for its
/// name, its probes (enhanced liveness, PodProbeMarker on serverless). Like the DaemonSet stamp,
/// they are decided when a real pod is created, so a template keeps its own value of each (or none).
const PER_POD_ANNOTATIONS: &[&str] = &[
    MATCHED_ANNOTATION,
    RELATED_PUB_ANNOTATION,
    INJECTED_ANNOTATION,
    CONTEXT_ANNOTATION,
    PROBES_ANNOTATION,
    LIST_ANNOTATION,
];

fn keep_per_pod_annotations(annotations: &mut Map<String, Value>, own: Option<&Map<String, Value>>) {
    for key in PER_POD_ANNOTATIONS {
        match own.and_then(|own| own.get(*key)) {
            Some(value) => annotations.insert((*key).to_owned(), value.clone()),
            None => annotations.remove(*key),
        };
    }
}

/// The enhanced liveness step (gate `EnhancedLivenessProbe`) takes a container's `livenessProbe`
/// off the Pod and records it in an annotation: a template keeps the probes it has (a cluster
/// without the gate would run its pods without them).
fn keep_liveness_probes(containers: &mut Value, template: Option<&Value>) {
    for container in containers.as_array_mut().into_iter().flatten() {
        let own = template_twin(template, container);
        let (Some(probe), Some(fields)) =
            (own.and_then(|t| t.get("livenessProbe")), container.as_object_mut())
        else {
            continue;
        };
        fields.insert("livenessProbe".into(), probe.clone());
    }
}

/// Launch priority's `KRUISE_CONTAINER_BARRIER` envs name the pod, which a template does not have
/// yet: like the DaemonSet stamp, they are decided when a real pod is created, so the ones the
/// webhook added are not written into a template (a container's own are kept).
fn drop_launch_barriers(containers: &mut Value, template: Option<&Value>) {
    for container in containers.as_array_mut().into_iter().flatten() {
        let own = template_twin(template, container);
        let is_barrier = |e: &Value| e.get("name").and_then(Value::as_str) == Some(BARRIER_ENV);
        let had_env = own.and_then(|t| t.get("env"));
        if had_env.and_then(Value::as_array).is_some_and(|env| env.iter().any(is_barrier)) {
            continue;
        }
        let Some(fields) = container.as_object_mut() else { continue };
        if let Some(env) = fields.get_mut("env").and_then(Value::as_array_mut) {
            env.retain(|e| !is_barrier(e));
            if env.is_empty() && had_env.is_none() {
                fields.remove("env");
            }
        }
    }
}

/// The template's own container of the same name as `container` (a container of the mutated Pod).
fn template_twin<'t>(template: Option<&'t Value>, container: &Value) -> Option<&'t Value> {
    fn name_of(c: &Value) -> Option<&str> {
        c.get("name").and_then(Value::as_str)
    }
    template.and_then(Value::as_array)?.iter().find(|t| name_of(t) == name_of(container))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn templates_are_found_for_every_workload_kind() {
        let at = |api: &str, kind: &str| template_pointer(&json!({"apiVersion": api, "kind": kind}));
        assert_eq!(at("v1", "Pod"), Some(""));
        for (api, kind) in [
            ("apps/v1", "Deployment"),
            ("apps/v1", "ReplicaSet"),
            ("apps/v1", "StatefulSet"),
            ("apps/v1", "DaemonSet"),
            ("batch/v1", "Job"),
            ("apps.kruise.io/v1alpha1", "CloneSet"),
            ("apps.kruise.io/v1beta1", "StatefulSet"),
            ("apps.kruise.io/v1alpha1", "DaemonSet"),
        ] {
            assert_eq!(at(api, kind), Some("/spec/template"), "{api} {kind}");
        }
        assert_eq!(at("batch/v1", "CronJob"), Some("/spec/jobTemplate/spec/template"));
        assert_eq!(at("v1", "Service"), None);
        assert_eq!(at("example.com/v1", "Deployment"), None);
    }

    #[test]
    fn launch_barriers_stay_out_of_templates() {
        let barrier = json!({"name": "KRUISE_CONTAINER_BARRIER", "valueFrom": {"configMapKeyRef": {"name": "-barrier", "key": "p_0"}}});
        let mut template = json!({"spec": {"containers": [
            {"name": "a", "env": [{"name": "X", "value": "1"}]},
            {"name": "b"},
            {"name": "c", "env": [barrier.clone()]},
        ]}});
        let before = template.clone();
        let mutated = json!({"spec": {"containers": [
            {"name": "sidecar", "env": [barrier.clone()]},
            {"name": "a", "env": [{"name": "X", "value": "1"}, barrier.clone()]},
            {"name": "b", "env": [barrier.clone()]},
            {"name": "c", "env": [barrier.clone()]},
        ]}});
        write_back(&mut template, &mutated);
        let mut expected = before["spec"]["containers"].as_array().unwrap().clone();
        expected.insert(0, json!({"name": "sidecar"}));
        assert_eq!(template["spec"]["containers"], Value::Array(expected));
    }

    #[test]
    fn only_what_injection_writes_goes_back() {
        let mut template = json!({"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "app"}], "x-unknown": 1}});
        let mutated = json!({
            "metadata": {"labels": {"a": "b"}, "namespace": "shop", "annotations": {"k": "v"}},
            "spec": {
                "containers": [{"name": "app"}, {"name": "sidecar"}], "volumes": [{"name": "v"}], "x-unknown": 1,
                "tolerations": [{"key": "node.kubernetes.io/not-ready"}], "affinity": {},
            },
        });
        write_back(&mut template, &mutated);
        assert_eq!(
            template,
            json!({
                "metadata": {"labels": {"a": "b"}, "annotations": {"k": "v"}},
                "spec": {"containers": [{"name": "app"}, {"name": "sidecar"}], "x-unknown": 1, "volumes": [{"name": "v"}]},
            })
        );
    }

    #[test]
    fn what_other_steps_write_about_one_pod_stays_out_of_templates() {
        let probe = json!({"httpGet": {"path": "/healthz", "port": 8080}});
        let mut template = json!({
            "metadata": {"annotations": {"apps.kruise.io/using-enhanced-liveness": "true", "kruise.io/related-pub": "own"}},
            "spec": {"containers": [{"name": "app", "livenessProbe": probe.clone()}]},
        });
        let mutated = json!({
            "metadata": {"annotations": {
                "apps.kruise.io/using-enhanced-liveness": "true",
                "kruise.io/sidecarset-injected-list": "log-agent",
                "kruise.io/related-pub": "budget",
                "kruise.io/podprobe": "[]",
                "kruise.io/podprobemarker-list": "marker",
                "apps.kruise.io/container-probe-context": "[]",
                "apps.kruise.io/matched-workloadspread": "{}",
                "kruise.io/injected-persistent-pod-state": "true",
            }},
            "spec": {"containers": [{"name": "app"}, {"name": "log-agent"}]},
        });
        write_back(&mut template, &mutated);
        assert_eq!(
            template,
            json!({
                "metadata": {"annotations": {
                    "apps.kruise.io/using-enhanced-liveness": "true",
                    "kruise.io/sidecarset-injected-list": "log-agent",
                    "kruise.io/related-pub": "own",
                }},
                "spec": {"containers": [{"name": "app", "livenessProbe": probe}, {"name": "log-agent"}]},
            })
        );
    }

    #[test]
    fn a_pod_from_a_template_is_in_the_workloads_namespace() {
        let pod =
            pod_of(&json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}), "shop");
        assert_eq!(pod["metadata"], json!({"labels": {"app": "web"}, "namespace": "shop"}));
        assert_eq!(
            (pod["kind"].as_str(), pod["spec"]["containers"].as_array().map(Vec::len)),
            (Some("Pod"), Some(0))
        );
    }

    #[test]
    fn unreadable_documents_are_named() {
        assert!(parse("a: 1\n---\n- x\n").unwrap_err().contains("document 1 is not an object"));
        assert!(parse("{\"a\": 1}\n{").unwrap_err().starts_with("document 1: invalid JSON"));
        assert_eq!(parse("---\n---\nkind: A\n").unwrap().len(), 1);
    }
}
