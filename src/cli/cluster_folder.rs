//! The cluster `dry-run` and `inject` decide against, as the cluster would hold it, and never a
//! silent guess about it: `--cluster-dir` read as an export of a cluster (`kubectl get -o yaml`), its
//! SidecarSets admitted as the cluster stored them (`sidecarset_rules::stored`: what Kruise would
//! refuse stops the command, in the words `--with` uses), and the `--with` objects layered over it as
//! `kubectl apply` would store them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::inputs::bare_object;
use crate::admission::injection::matching::skipped_for_unknown_namespace;
use crate::admission::review::{AdmissionRequest, Decision, Operation};
use crate::admission::sidecarset_rules::{stored, validate::folder_conflicts};
use crate::admission::webhooks::{self, Capability};
use crate::admission::{Clock, Inputs, Random, Settings};
use crate::api::sidecarset::HASH_ANNOTATION;
use crate::api::tree::Json;
use crate::cluster::files::{Loaded, load_objects};
use crate::cluster::{Answers, ObjectKey, Snapshot, TypeKey};

/// What the decisions of one run read besides the cluster.
pub struct Deciding<'a> {
    pub clock: &'a dyn Clock,
    pub random: &'a dyn Random,
    pub settings: &'a Settings,
}

/// The loaded cluster: the folder's objects, and (with `--with`) the cluster after the `--with`
/// objects were applied to it.
pub struct Cluster {
    pub folder: Snapshot,
    pub with: Option<Snapshot>,
}

impl Cluster {
    /// The cluster the decisions read: with the `--with` objects when there are any.
    pub fn current(&self) -> &Snapshot {
        self.with.as_ref().unwrap_or(&self.folder)
    }
}

/// Load `--cluster-dir` (none: an empty cluster) and layer each `--with` over it. Warnings and
/// notes go to stderr as `<command>: warning: …`; an error is what stops the command (exit 2).
pub fn load(
    command: &str,
    cluster_dir: Option<&PathBuf>,
    with: &[PathBuf],
    deciding: &Deciding,
) -> Result<Cluster, String> {
    let mut objects = Vec::new();
    if let Some(dir) = cluster_dir {
        let loaded = read(command, "--cluster-dir", dir)?;
        objects = as_stored(command, loaded, deciding)?;
    }
    let folder = Snapshot::from_shared(objects.clone());
    for conflict in folder_conflicts(&folder) {
        eprintln!("{command}: warning: --cluster-dir: {conflict}");
    }
    let mut layers = Vec::new();
    for path in with {
        layers.extend(read(command, "--with", path)?);
    }
    if layers.is_empty() {
        return Ok(Cluster { folder, with: None });
    }
    let answers = Answers::default();
    let inputs = deciding.inputs(&folder, &answers);
    for (file, object) in layers {
        let applied = applied(object, &inputs).map_err(|m| format!("--with {}: {m}", file.display()))?;
        objects.push(Arc::new(applied));
    }
    Ok(Cluster { folder, with: Some(Snapshot::from_shared(objects)) })
}

impl<'a> Deciding<'a> {
    fn inputs(&self, cluster: &'a Snapshot, answers: &'a Answers) -> Inputs<'a> {
        Inputs { cluster, answers, clock: self.clock, random: self.random, settings: self.settings }
    }
}

/// The objects of a file or folder, each with its file; their load warnings on stderr.
fn read(command: &str, flag: &str, path: &Path) -> Result<Vec<Loaded>, String> {
    let (loaded, warnings) = load_objects(path).map_err(|e| format!("cannot load {flag}: {e}"))?;
    for w in warnings {
        eprintln!("{command}: warning: {w}");
    }
    Ok(loaded)
}

/// The folder's objects as the cluster stores them (`sidecarset_rules::stored`), with a note naming
/// the SidecarSets that were given hashes here.
fn as_stored(
    command: &str,
    loaded: Vec<(PathBuf, Value)>,
    deciding: &Deciding,
) -> Result<Vec<Arc<Value>>, String> {
    let folder = stored::folder(loaded, deciding.settings, deciding.clock, deciding.random)
        .map_err(|message| format!("--cluster-dir {message}"))?;
    if !folder.hashed_here.is_empty() {
        eprintln!(
            "{command}: note: --cluster-dir: no {HASH_ANNOTATION} annotations on SidecarSet {}: using the ones \
             Kruise's SidecarSet webhook would store",
            folder.hashed_here_shown()
        );
    }
    Ok(folder.objects)
}

/// `object` as `kubectl apply` would leave it in `inputs.cluster`: an UPDATE of the object of the
/// same key there, else a CREATE, through every webhook the API server would call. The stored
/// object, or why it would be refused.
fn applied(object: Value, inputs: &Inputs) -> Result<Value, String> {
    let existing = match (TypeKey::of(&object), ObjectKey::of(&object)) {
        (Some(t), Some(k)) => {
            inputs.cluster.get(&t.group, &t.kind, &k.namespace, &k.name).map(|o| Value::clone(&o))
        }
        _ => None,
    };
    let mut request = bare_object(object, "--with");
    if let Some(old) = existing {
        request.operation = Operation::Update;
        request.old_object = Some(Json::from(old));
    }
    let chain: Vec<_> = webhooks::matching(&request).collect();
    let mut denied = None;
    webhooks::run_chain_offline(&chain, &mut request, inputs, |_, _, decision| {
        if !decision.allowed && denied.is_none() {
            denied = Some(decision);
        }
    });
    match denied {
        Some(decision) => Err(refusal(&request, &decision)),
        None => Ok(request.object.map_or(Value::Null, Json::into_value)),
    }
}

/// `Kind namespace/name`, as the refusals name an object.
fn subject(request: &AdmissionRequest) -> String {
    format!("{} {}", request.kind.kind, request.display_name())
}

/// Why the cluster would refuse the object, as `--with` and `--cluster-dir` say it.
fn refusal(request: &AdmissionRequest, decision: &Decision) -> String {
    let (code, message) = status(decision);
    format!("{} would be refused ({code}): {message}", subject(request))
}

/// A decision's status code and message (a denial without a status is a 403).
pub fn status(decision: &Decision) -> (u16, String) {
    let status = decision.status.as_ref();
    (status.map_or(403, |s| s.code), status.map(|s| s.message.clone()).unwrap_or_default())
}

/// The warning for a Pod CREATE whose Namespace the cluster folder lacks, naming the SidecarSets
/// that select namespaces by label and so were skipped for it (a live cluster always has the
/// Namespace); `None` otherwise.
pub fn unknown_namespace(
    request: &AdmissionRequest,
    cluster: &Snapshot,
    settings: &Settings,
) -> Option<String> {
    let is_pod_create = request.operation == Operation::Create
        && request.kind.group.is_empty()
        && request.kind.kind == "Pod"
        && request.sub_resource.is_empty();
    if !is_pod_create || !settings.enabled(Capability::PodMutation) {
        return None;
    }
    let pod = request.object.as_ref()?;
    let skipped = skipped_for_unknown_namespace(pod, &request.namespace, cluster);
    (!skipped.is_empty()).then(|| {
        format!(
            "Namespace {} is not in --cluster-dir, so the SidecarSets that select namespaces by label were \
             skipped: {}",
            request.namespace,
            skipped.join(", ")
        )
    })
}
