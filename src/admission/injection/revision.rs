//! Which revision of a SidecarSet a pod gets (docs/sidecarset.md#3-revisions): the live object, or a version
//! pinned through `injectionStrategy.revision` and restored from a ControllerRevision in the Kruise
//! namespace.

use std::borrow::Cow;
use std::sync::Arc;

use crate::api::tree::{Json, Object};

use super::build::Chosen;
use super::matching::{labels_of, selector_matches};
use crate::admission::Inputs;
use crate::admission::sidecarset_rules::hash::sidecarset_hashes;
use crate::api::sidecarset::{
    CUSTOM_VERSION_LABEL, HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, IntOrString,
    REVISION_SIDECARSET_NAME_LABEL, SidecarSet, SidecarSetSpec, SidecarSetStatus,
};

/// The SidecarSet version to inject into `pod`. Errors are Kruise's denials (docs/sidecarset.md#10-3).
pub fn select<'a>(set: &'a Arc<SidecarSet>, pod: &Json<'_>, inputs: &Inputs) -> Result<Chosen<'a>, String> {
    let Some(revision) = set.spec.injection_strategy.as_ref().and_then(|s| s.revision.as_ref()) else {
        return Ok(Cow::Borrowed(set));
    };
    if revision.custom_version.is_none() && revision.revision_name.is_none() {
        return Ok(Cow::Borrowed(set));
    }
    // The pinned revision is fetched before the policy is looked at, so a missing one rejects
    // every matching pod (Kruise's order).
    let pinned = Cow::Owned(restore(
        set,
        revision.revision_name.as_deref(),
        revision.custom_version.as_deref(),
        inputs,
    )?);
    let strategy = set.spec.update_strategy.as_ref();
    if strategy.and_then(|s| s.paused) == Some(true) {
        return Ok(pinned);
    }
    if revision.policy != "Partial" {
        return Ok(pinned);
    }
    if let Some(selector) = strategy.and_then(|s| s.selector.as_ref()) {
        selector.check().map_err(|e| {
            format!("SidecarSet {} has an invalid spec.updateStrategy.selector: {e}", set.name())
        })?;
        if !selector_matches(selector, labels_of(pod).map(Object::lookup).as_ref()) {
            return Ok(pinned);
        }
    }
    match strategy.and_then(|s| s.partition.as_ref()) {
        None | Some(IntOrString::Int(_)) => Ok(Cow::Borrowed(set)),
        Some(IntOrString::String(p)) => {
            let percent = p.strip_suffix('%').and_then(|n| n.trim().parse::<f64>().ok()).ok_or_else(|| {
                format!(
                    "SidecarSet {}: spec.updateStrategy.partition {p:?} must be a percentage like \"20%\" with the Partial revision policy",
                    set.name()
                )
            })?;
            if inputs.random.uniform() <= percent / 100.0 { Ok(pinned) } else { Ok(Cow::Borrowed(set)) }
        }
    }
}

/// Restore the pinned ControllerRevision onto the live object.
fn restore(
    set: &Arc<SidecarSet>,
    revision_name: Option<&str>,
    custom_version: Option<&str>,
    inputs: &Inputs,
) -> Result<Arc<SidecarSet>, String> {
    let ns = inputs.settings.kruise_namespace.as_str();
    let revision = match (revision_name, custom_version) {
        (Some(name), _) => inputs.cluster.revision(ns, name).ok_or_else(|| {
            format!(
                "SidecarSet {} pins revision {name:?}, but ControllerRevision {ns}/{name} does not exist",
                set.name()
            )
        })?,
        (None, Some(version)) => inputs
            .cluster
            .revisions(ns)
            .filter(|r| r.is_custom_version(set.name(), version))
            .max_by_key(|r| r.revision)
            .ok_or_else(|| {
                format!(
                    "SidecarSet {} pins customVersion {version:?}, but no ControllerRevision in {ns} has labels {REVISION_SIDECARSET_NAME_LABEL}={} and \
                     {CUSTOM_VERSION_LABEL}={version}",
                    set.name(),
                    set.name()
                )
            })?,
        (None, None) => return Ok(Arc::clone(set)),
    };
    let revision_name = &*revision.name;
    let restore_error = |e: String| {
        format!("SidecarSet {}: ControllerRevision {ns}/{revision_name} cannot be restored: {e}", set.name())
    };
    let spec_value = revision.spec().ok_or_else(|| restore_error("it has no data.spec".into()))?;
    let spec: SidecarSetSpec =
        serde_json::from_value(spec_value).map_err(|e| restore_error(e.to_string()))?;
    let mut restored = SidecarSet { spec, ..(**set).clone() };
    let (hash, without_image) = match (&revision.hash, &revision.hash_without_image) {
        (Some(h), Some(w)) => (h.to_string(), w.to_string()),
        // Kruise recomputes them from the restored spec (docs/sidecarset.md#3-revisions); one hash
        // implementation serves this and the SidecarSet mutating webhook.
        _ => {
            let spec = serde_json::to_value(&restored.spec).map_err(|e| restore_error(e.to_string()))?;
            sidecarset_hashes(&spec).map_err(|e| restore_error(e.to_string()))?
        }
    };
    restored.metadata.annotations.insert(HASH_ANNOTATION.into(), hash);
    restored.metadata.annotations.insert(HASH_WITHOUT_IMAGE_ANNOTATION.into(), without_image);
    restored.status.get_or_insert_with(SidecarSetStatus::default).latest_revision = revision_name.to_owned();
    Ok(Arc::new(restored))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::{FixedClock, Random, Settings};
    use crate::cluster::{Answers, Snapshot};
    use serde_json::{Value, json};

    struct Draw(f64);
    impl Random for Draw {
        fn uniform(&self) -> f64 {
            self.0
        }
    }

    /// The image the pod would get for `strategy` and `revision` with the random draw `u`.
    fn image(strategy: Value, revision: Value, u: f64) -> Result<String, String> {
        let set = SidecarSet::from_value(
            &json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "SidecarSet", "metadata": {"name": "s"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "containers": [{"name": "c", "image": "latest"}],
                     "updateStrategy": strategy, "injectionStrategy": {"revision": revision}}}),
        )?;
        let cluster = Snapshot::from_objects([json!({"apiVersion": "apps/v1", "kind": "ControllerRevision",
            "metadata": {"name": "r1", "namespace": "kruise-system", "annotations": {"kruise.io/sidecarset-hash": "h", "kruise.io/sidecarset-hash-without-image": "w"}},
            "revision": 1, "data": {"spec": {"$patch": "replace", "containers": [{"name": "c", "image": "pinned"}]}}})]);
        let (answers, clock, settings, random) =
            (Answers::default(), FixedClock(time::OffsetDateTime::UNIX_EPOCH), Settings::default(), Draw(u));
        let inputs = Inputs {
            cluster: &cluster,
            answers: &answers,
            clock: &clock,
            random: &random,
            settings: &settings,
        };
        let pod = Json::from(json!({"metadata": {"labels": {"app": "web", "track": "stable"}}}));
        let set = Arc::new(set);
        let chosen = select(&set, &pod, &inputs)?;
        Ok(chosen.spec.containers[0].container["image"].as_str().unwrap_or_default().to_owned())
    }

    #[test]
    fn revision_policies() {
        let pin = json!({"revisionName": "r1"});
        let partial = json!({"revisionName": "r1", "policy": "Partial"});
        assert_eq!(image(json!({}), json!({}), 0.0).unwrap(), "latest");
        assert_eq!(image(json!({}), pin.clone(), 0.9).unwrap(), "pinned");
        assert_eq!(image(json!({"paused": true}), partial.clone(), 0.9).unwrap(), "pinned");
        assert_eq!(image(json!({}), partial.clone(), 0.9).unwrap(), "latest");
        assert_eq!(image(json!({"partition": 3}), partial.clone(), 0.0).unwrap(), "latest");
        assert_eq!(image(json!({"partition": "100%"}), partial.clone(), 0.99).unwrap(), "pinned");
        assert_eq!(image(json!({"partition": "0%"}), partial.clone(), 0.01).unwrap(), "latest");
        assert_eq!(
            image(
                json!({"selector": {"matchLabels": {"track": "canary"}}, "partition": "0%"}),
                partial.clone(),
                0.5
            )
            .unwrap(),
            "pinned"
        );
        assert_eq!(
            image(
                json!({"selector": {"matchLabels": {"track": "stable"}}, "partition": "0%"}),
                partial.clone(),
                0.5
            )
            .unwrap(),
            "latest"
        );
        assert!(
            image(
                json!({"selector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]}}),
                partial.clone(),
                0.5
            )
            .is_err()
        );
        assert!(image(json!({"partition": "5"}), partial, 0.5).unwrap_err().contains("percentage"));
        assert!(
            image(json!({}), json!({"revisionName": "missing"}), 0.5).unwrap_err().contains("does not exist")
        );
        assert!(
            image(json!({}), json!({"customVersion": "v9"}), 0.5)
                .unwrap_err()
                .contains("no ControllerRevision")
        );
    }
}
