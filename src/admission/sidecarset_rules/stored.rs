//! A cluster folder's objects as the cluster would hold them, for everything that reads a folder in
//! place of a cluster (`dry-run`, `inject` and `serve --cluster-dir`).
//!
//! A folder SidecarSet is something the cluster accepted, so each one goes through our SidecarSet
//! webhooks as a CREATE: Kruise's defaults, then our validation (conflicts with the others aside:
//! `validate::folder_conflicts` reports each pair from both sides). A hand-written SidecarSet without
//! its hash annotations gets the ones our SidecarSet mutating webhook (Kruise's hashes) would store,
//! since injection copies them into every pod; hashes a SidecarSet carries are kept, being what the
//! cluster computed when it stored it.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::{mutate, validate_in_folder};
use crate::admission::draft::Draft;
use crate::admission::review::{AdmissionError, AdmissionRequest, Gvk, Gvr, Operation, ReviewVersion};
use crate::admission::{Clock, Inputs, Random, Settings};
use crate::api::sidecarset::{GROUP, HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, KIND};
use crate::api::tree::Json;
use crate::cluster::{Answers, Snapshot, TypeKey};

/// The folder's objects as the cluster stores them, and the names of the SidecarSets that were given
/// hashes here (they came without them).
#[derive(Debug)]
pub struct Folder {
    /// Every object but the SidecarSets is the loaded one, shared rather than copied.
    pub objects: Vec<Arc<Value>>,
    pub hashed_here: Vec<String>,
}

/// How many of [`Folder::hashed_here`] a log line names; a folder of generated SidecarSets would
/// otherwise make it thousands of names long.
const HASHED_HERE_SHOWN: usize = 10;

impl Folder {
    /// The SidecarSets given hashes here, for one line: the first few names, then how many more.
    pub fn hashed_here_shown(&self) -> String {
        let shown = self.hashed_here.iter().take(HASHED_HERE_SHOWN).map(String::as_str).collect::<Vec<_>>();
        match self.hashed_here.len().saturating_sub(HASHED_HERE_SHOWN) {
            0 => shown.join(", "),
            more => format!("{} and {more} more", shown.join(", ")),
        }
    }
}

/// Each SidecarSet of `loaded` (objects with their files) as the cluster stores it, the other
/// objects as they are; the error names the file and says why the cluster would refuse the
/// SidecarSet, in the words `dry-run --with` uses.
pub fn folder(
    loaded: Vec<(PathBuf, Value)>,
    settings: &Settings,
    clock: &dyn Clock,
    random: &dyn Random,
) -> Result<Folder, String> {
    let loaded: Vec<(PathBuf, Arc<Value>)> =
        loaded.into_iter().map(|(file, o)| (file, Arc::new(o))).collect();
    // What the SidecarSet webhooks look up (a canary's base, the patchPodMetadata whitelist) is read
    // from the folder as loaded, sharing its objects.
    let lookups = Snapshot::from_shared(loaded.iter().map(|(_, object)| Arc::clone(object)));
    let answers = Answers::default();
    let inputs = Inputs { cluster: &lookups, answers: &answers, clock, random, settings };
    let mut folder = Folder { objects: Vec::with_capacity(loaded.len()), hashed_here: Vec::new() };
    for (file, object) in &loaded {
        if !TypeKey::of(object).is_some_and(|t| t.group == GROUP && t.kind == KIND) {
            folder.objects.push(Arc::clone(object));
            continue;
        }
        let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let (stored, carried_hashes) = sidecarset(Value::clone(object), &inputs).map_err(|e| {
            format!("{}: SidecarSet {name} would be refused ({}): {e}", file.display(), e.code())
        })?;
        if !carried_hashes {
            folder.hashed_here.push(name);
        }
        folder.objects.push(Arc::new(stored));
    }
    Ok(folder)
}

/// One SidecarSet as the cluster stores it, and whether it came with both hash annotations: our
/// SidecarSet mutating webhook (Kruise's defaults and hashes), the hashes it carried put back, then
/// our validation, each as a CREATE.
fn sidecarset(object: Value, inputs: &Inputs) -> Result<(Value, bool), AdmissionError> {
    let hash = |o: &Value, key: &str| o.get("metadata")?.get("annotations")?.get(key).cloned();
    let carried = [HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION].map(|key| hash(&object, key));
    let request = create(object);
    let original = request.object.as_ref().ok_or_else(|| AdmissionError::Internal("no object".into()))?;
    let mut draft = Draft::Same(original);
    mutate(&request, &mut draft, inputs)?;
    let mut stored = draft.into_json().into_value();
    let carried_both = carried.iter().all(Option::is_some);
    if carried_both
        && let Some(annotations) = stored.pointer_mut("/metadata/annotations").and_then(Value::as_object_mut)
    {
        for (key, value) in [HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION].into_iter().zip(carried) {
            annotations.insert(key.to_owned(), value.unwrap_or_default());
        }
    }
    let request = create(stored);
    validate_in_folder(&request, inputs)?;
    Ok((request.object.map_or(Value::Null, Json::into_value), carried_both))
}

/// A CREATE of the SidecarSet `object` (cluster-scoped), at the version its `apiVersion` names.
fn create(object: Value) -> AdmissionRequest<'static> {
    let version = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.strip_prefix(GROUP)?.strip_prefix('/'))
        .unwrap_or_default()
        .to_owned();
    AdmissionRequest {
        version: ReviewVersion::V1,
        uid: String::new(),
        kind: Gvk { group: GROUP.into(), version: version.clone(), kind: KIND.into() },
        resource: Gvr { group: GROUP.into(), version, resource: "sidecarsets".into() },
        sub_resource: String::new(),
        name: object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_owned(),
        namespace: String::new(),
        operation: Operation::Create,
        object: Some(Json::from(object)),
        old_object: None,
        dry_run: false,
        decode_warnings: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::admission::{FixedClock, SeededRandom};

    fn load(objects: Vec<Value>) -> Result<Folder, String> {
        let loaded = objects.into_iter().map(|o| (PathBuf::from("folder/set.yaml"), o)).collect();
        let clock = FixedClock(time::OffsetDateTime::UNIX_EPOCH);
        folder(loaded, &Settings::default(), &clock, &SeededRandom::new(0))
    }

    fn set(annotations: Value) -> Value {
        json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet",
               "metadata": {"name": "log-agent", "annotations": annotations},
               "spec": {"selector": {"matchLabels": {"app": "web"}},
                        "containers": [{"name": "agent", "image": "agent:1"}]}})
    }

    #[test]
    fn a_hand_written_sidecarset_is_defaulted_and_hashed_and_named() {
        let folder = load(vec![
            set(json!({})),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "a"}}),
        ])
        .unwrap();
        let stored = &folder.objects[0];
        let annotations = &stored["metadata"]["annotations"];
        assert!(annotations[HASH_ANNOTATION].as_str().is_some_and(|h| !h.is_empty()));
        assert!(annotations[HASH_WITHOUT_IMAGE_ANNOTATION].as_str().is_some_and(|h| !h.is_empty()));
        assert_eq!(stored["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent", "Kruise's defaults");
        assert_eq!(folder.hashed_here, ["log-agent"]);
        assert_eq!(folder.objects[1]["kind"], "Namespace", "other objects pass as they are");
    }

    #[test]
    fn a_long_list_of_hashed_here_names_the_first_ten_then_counts() {
        let names = |n: usize| (0..n).map(|i| format!("s{i}")).collect::<Vec<_>>();
        let shown = |n| Folder { objects: Vec::new(), hashed_here: names(n) }.hashed_here_shown();
        assert_eq!(shown(2), "s0, s1");
        assert_eq!(shown(10), names(10).join(", "));
        assert_eq!(shown(997), format!("{} and 987 more", names(10).join(", ")));
    }

    #[test]
    fn carried_hashes_are_kept() {
        let carried = json!({HASH_ANNOTATION: "from-the-cluster", HASH_WITHOUT_IMAGE_ANNOTATION: "also"});
        let folder = load(vec![set(carried.clone())]).unwrap();
        assert_eq!(folder.objects[0]["metadata"]["annotations"][HASH_ANNOTATION], "from-the-cluster");
        assert_eq!(folder.objects[0]["metadata"]["annotations"][HASH_WITHOUT_IMAGE_ANNOTATION], "also");
        assert!(folder.hashed_here.is_empty());
    }

    #[test]
    fn a_sidecarset_the_cluster_would_refuse_names_its_file_and_why() {
        let mut refused = set(json!({}));
        refused["spec"].as_object_mut().unwrap().remove("selector");
        let error = load(vec![refused]).unwrap_err();
        assert!(error.starts_with("folder/set.yaml: SidecarSet log-agent would be refused ("), "{error}");
    }
}
