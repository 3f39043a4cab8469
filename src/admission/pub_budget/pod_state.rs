//! Whether a pod counts towards a PodUnavailableBudget's healthy pods at all (Kruise's
//! `PubControl.IsPodReady` and `IsPodStateConsistent`): a pod that does not is not protected, since
//! disrupting it cannot lower the budget's availability.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::Value;

use super::{annotation, has_unavailable_label};
use crate::api::image_ref;
use crate::api::sidecarset::{INJECTED_LIST_ANNOTATION, INPLACE_UPDATE_STATE_ANNOTATION, IS_INJECTED_ENV};
use crate::api::tree::Json;

/// Kruise's in-place update state of a pod (`apps.kruise.io/inplace-update-state`, formerly
/// `inplace-update-state`) and its grace period before the update (`...-grace`).
const INPLACE_STATE: [&str; 2] = ["apps.kruise.io/inplace-update-state", "inplace-update-state"];
const INPLACE_GRACE: [&str; 2] = ["apps.kruise.io/inplace-update-grace", "inplace-update-grace"];
/// What kruise-daemon reports of the pod's running containers.
const RUNTIME_META: &str = "apps.kruise.io/runtime-containers-meta";

/// `IsPodReady`: running, its `Ready` condition (the first of that type) `True`, not being deleted,
/// and no `unavailable-pod.kruise.io/` label.
pub fn is_ready(pod: &Json) -> bool {
    let status = pod.get("status");
    let running = status.and_then(|s| s.get("phase")).and_then(Json::as_str) == Some("Running");
    let ready = status
        .and_then(|s| s.get("conditions"))
        .and_then(Json::as_array)
        .and_then(|conditions| {
            conditions.iter().find(|c| c.get("type").and_then(Json::as_str) == Some("Ready"))
        })
        .and_then(|c| c.get("status"))
        .and_then(Json::as_str)
        == Some("True");
    let deleting = pod.at(&["metadata", "deletionTimestamp"]).is_some_and(|t| !t.is_null());
    running && ready && !deleting && !has_unavailable_label(pod)
}

/// `IsPodStateConsistent`: the containers run what the spec asks for. When every container's image
/// is a digest, by the image IDs the kubelet reports; otherwise by Kruise's records of in-place
/// updates (SidecarSet sidecars, then the workload's own containers).
pub fn is_consistent(pod: &Json) -> bool {
    let containers = containers(pod);
    let statuses = container_statuses(pod);
    let mut all_digest = true;
    for container in &containers {
        if !image_ref::is_digest(container.image) {
            all_digest = false;
            continue;
        }
        if !digest_matches(container.name, &containers, &statuses) {
            return false;
        }
    }
    all_digest
        || (sidecars_updated(pod, &containers, &statuses)
            && inplace_update_completed(pod, &containers, &statuses))
}

struct Container<'p> {
    name: &'p str,
    image: &'p str,
    injected: bool,
}

struct Status<'p> {
    name: &'p str,
    image: &'p str,
    image_id: &'p str,
}

fn str_of<'p>(object: &'p Json, key: &str) -> &'p str {
    object.get(key).and_then(Json::as_str).unwrap_or_default()
}

fn containers<'p>(pod: &'p Json) -> Vec<Container<'p>> {
    let items = pod.at(&["spec", "containers"]).and_then(Json::as_array);
    items
        .into_iter()
        .flatten()
        .map(|c| {
            // util.GetContainerEnvValue: the first variable of that name.
            let env = c.get("env").and_then(Json::as_array).into_iter().flatten();
            let injected =
                env.into_iter().find(|e| str_of(e, "name") == IS_INJECTED_ENV).map(|e| str_of(e, "value"));
            Container {
                name: str_of(c, "name"),
                image: str_of(c, "image"),
                injected: injected == Some("true"),
            }
        })
        .collect()
}

fn container_statuses<'p>(pod: &'p Json) -> Vec<Status<'p>> {
    let items = pod.at(&["status", "containerStatuses"]).and_then(Json::as_array);
    items
        .into_iter()
        .flatten()
        .map(|s| Status {
            name: str_of(s, "name"),
            image: str_of(s, "image"),
            image_id: str_of(s, "imageID"),
        })
        .collect()
}

/// `IsPodContainerDigestEqual` for one container name: every container of that name has a digest
/// image equal to the image ID reported for the name (`docker-pullable://` and the like dropped;
/// the last status of a name wins, as Kruise's map keeps it).
fn digest_matches(name: &str, containers: &[Container], statuses: &[Status]) -> bool {
    let image_id = statuses.iter().rev().find(|s| s.name == name).map(|s| {
        // strings.Split(id, "://")[1]: what lies between the first and a second "://".
        s.image_id.split("://").nth(1).unwrap_or(s.image_id)
    });
    containers.iter().filter(|c| c.name == name).all(|c| {
        image_ref::is_digest(c.image) && image_id.is_some_and(|id| image_ref::same_image(c.image, id))
    })
}

/// Kruise's `InPlaceUpdateState`, as far as the check reads it. A field of the wrong type fails the
/// whole record, as Go's `json.Unmarshal` fails it.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct UpdateState {
    #[serde(default)]
    last_container_statuses: Option<HashMap<String, LastStatus>>,
    #[serde(default)]
    next_container_images: Option<HashMap<String, String>>,
    #[serde(default)]
    next_container_ref_metadata: Option<HashMap<String, Value>>,
    #[serde(default)]
    next_container_resources: Option<HashMap<String, Value>>,
    #[serde(default)]
    update_env_from_metadata: Option<bool>,
    // Read only so that a value of the wrong type fails the record.
    #[serde(default, rename = "revision")]
    _revision: Option<String>,
    #[serde(default, rename = "updateTimestamp")]
    _update_timestamp: Option<KubeTime>,
}

#[derive(Debug, Default, Deserialize)]
struct LastStatus {
    #[serde(rename = "imageID", default)]
    image_id: Option<String>,
}

/// A `metav1.Time`: RFC 3339 text, which must parse.
#[derive(Debug)]
struct KubeTime;

impl<'de> Deserialize<'de> for KubeTime {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        time::OffsetDateTime::parse(&text, &time::format_description::well_known::Rfc3339)
            .map(|_| KubeTime)
            .map_err(serde::de::Error::custom)
    }
}

/// `sidecarcontrol.IsSidecarContainerUpdateCompleted`, when the pod lists SidecarSets and has
/// injected sidecars: no sidecar still reports the image ID it had before its in-place update
/// while its spec names another image.
fn sidecars_updated(pod: &Json, containers: &[Container], statuses: &[Status]) -> bool {
    let sidecar_sets: Vec<&str> = match annotation(pod, INJECTED_LIST_ANNOTATION) {
        Some(list) if !list.is_empty() => list.split(',').collect(),
        _ => Vec::new(),
    };
    let sidecars: Vec<&str> = containers.iter().filter(|c| c.injected).map(|c| c.name).collect();
    if sidecar_sets.is_empty() || sidecars.is_empty() {
        return true;
    }
    let Some(text) = annotation(pod, INPLACE_UPDATE_STATE_ANNOTATION) else { return true };
    let Ok(states) = serde_json::from_str::<HashMap<String, Option<UpdateState>>>(text) else { return false };
    // The SidecarSets in name order, a later one's record of a container winning.
    let mut last = HashMap::new();
    let ordered: std::collections::BTreeSet<&str> = sidecar_sets.into_iter().collect();
    for set in ordered {
        if let Some(Some(state)) = states.get(set) {
            for (name, status) in state.last_container_statuses.iter().flatten() {
                last.insert(name.as_str(), status.image_id.as_deref().unwrap_or_default());
            }
        }
    }
    let images: HashMap<&str, &str> = containers.iter().map(|c| (c.name, c.image)).collect();
    statuses.iter().filter(|s| sidecars.contains(&s.name)).all(|s| {
        !(last.get(s.name) == Some(&s.image_id) && images.get(s.name).copied().unwrap_or_default() != s.image)
    })
}

/// `inplaceupdate.DefaultCheckInPlaceUpdateCompleted`: not in the grace period before an in-place
/// update, no containers left for later batches, and every container updated in place reports a
/// new image ID (or still names the image it had).
fn inplace_update_completed(pod: &Json, containers: &[Container], statuses: &[Status]) -> bool {
    if INPLACE_GRACE.iter().any(|key| annotation(pod, key).is_some()) {
        return false;
    }
    let Some(text) = INPLACE_STATE.iter().find_map(|key| annotation(pod, key)) else { return true };
    let Ok(state) = serde_json::from_str::<Option<UpdateState>>(text) else { return false };
    let state = state.unwrap_or_default();
    let pending = [
        state.next_container_images.as_ref().map(HashMap::len),
        state.next_container_ref_metadata.as_ref().map(HashMap::len),
        state.next_container_resources.as_ref().map(HashMap::len),
    ];
    if pending.into_iter().flatten().any(|n| n > 0) {
        return false;
    }
    // Kruise-daemon's report of the running containers: one that does not parse fails the check,
    // and an update of environment variables from metadata waits for one. Its container hashes
    // are not compared (docs/differences.md).
    let runtime_meta = annotation(pod, RUNTIME_META);
    if runtime_meta.is_some_and(|text| serde_json::from_str::<Option<HashMap<String, Value>>>(text).is_err())
        || (state.update_env_from_metadata == Some(true) && runtime_meta.is_none())
    {
        return false;
    }
    // An image without any ':' reads as its `:latest`.
    let images: BTreeMap<&str, String> = containers
        .iter()
        .map(|c| {
            (c.name, if c.image.contains(':') { c.image.to_owned() } else { format!("{}:latest", c.image) })
        })
        .collect();
    let mut last: HashMap<&str, &str> = state
        .last_container_statuses
        .iter()
        .flatten()
        .map(|(name, s)| (name.as_str(), s.image_id.as_deref().unwrap_or_default()))
        .collect();
    for status in statuses {
        if let Some(before) = last.remove(status.name)
            && before == status.image_id
            && images.get(status.name).map(String::as_str).unwrap_or_default() != status.image
        {
            return false;
        }
    }
    last.is_empty()
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const SHA: &str = "a9286defaba7b3a519d585ba0e37d0b2cbee74ebfe590960b0b1d6a5e97d1e1d";

    fn pod(image: &str, image_id: &str, annotations: Value) -> Json<'static> {
        Json::from(json!({"metadata": {"annotations": annotations},
            "spec": {"containers": [{"name": "app", "image": image}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "app", "image": image, "imageID": image_id}]}}))
    }

    #[test]
    fn digest_images_are_checked_against_the_reported_image_ids() {
        let image = format!("registry.example.com/app@sha256:{SHA}");
        let id = format!("docker-pullable://registry.example.com/app@sha256:{SHA}");
        assert!(is_consistent(&pod(&image, &id, json!({}))));
        let other = format!("docker-pullable://registry.example.com/app@sha256:{}", "0".repeat(64));
        assert!(!is_consistent(&pod(&image, &other, json!({}))));
        assert!(!is_consistent(&pod(&image, "", json!({}))));
    }

    #[test]
    fn in_place_updates_in_progress_are_inconsistent() {
        let state = |value: Value| json!({"apps.kruise.io/inplace-update-state": value.to_string()});
        assert!(is_consistent(&pod("app:v1", "id", json!({}))));
        assert!(!is_consistent(&pod("app:v1", "id", json!({"apps.kruise.io/inplace-update-grace": "x"}))));
        assert!(!is_consistent(&pod("app:v1", "id", json!({"inplace-update-state": "{"}))));
        assert!(!is_consistent(&pod(
            "app:v1",
            "id",
            state(json!({"nextContainerImages": {"app": "app:v2"}}))
        )));
        // The container still reports the image ID it had before, under another image: not done.
        let before = state(json!({"lastContainerStatuses": {"app": {"imageID": "id"}}}));
        let mut old_image = pod("app:v1", "id", before.clone()).into_value();
        old_image["status"]["containerStatuses"][0]["image"] = json!("app:v0");
        assert!(!is_consistent(&Json::from(old_image)));
        assert!(is_consistent(&pod("app:v1", "id", before.clone())), "it already reports the new image");
        assert!(is_consistent(&pod("app:v1", "new-id", before)));
        // A recorded container without a status is not done either.
        let gone = state(json!({"lastContainerStatuses": {"gone": {"imageID": "id"}}}));
        assert!(!is_consistent(&pod("app:v1", "id", gone)));
        let bad_time = state(json!({"updateTimestamp": "yesterday"}));
        assert!(!is_consistent(&pod("app:v1", "id", bad_time)));
    }

    #[test]
    fn readiness_needs_running_ready_and_no_unavailable_label() {
        assert!(is_ready(&pod("app:v1", "id", json!({}))));
        let mut unlabelled = pod("app:v1", "id", json!({})).into_value();
        unlabelled["metadata"]["labels"] = json!({"unavailable-pod.kruise.io/a": ""});
        assert!(!is_ready(&Json::from(unlabelled)));
    }
}
