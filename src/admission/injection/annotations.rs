//! The Kruise annotations on a pod (docs/sidecarset.md#5-what-each-sidecarset-contributes,
//! docs/sidecarset.md#7-pod-annotations): the two hash maps, the injected list and the
//! working hot-upgrade container map. Parsed once from the pod, updated per SidecarSet, written back
//! with Kruise's exact JSON shapes.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::api::json_text::push_string;
use crate::api::tree::{Json, Object};

use crate::api::sidecarset::{
    HASH_ANNOTATION, HASH_WITHOUT_IMAGE_ANNOTATION, INJECTED_LIST_ANNOTATION,
    WORKING_HOTUPGRADE_CONTAINER_ANNOTATION,
};

/// One entry of `kruise.io/sidecarset-hash` (Kruise's `SidecarSetUpgradeSpec`). Serialised in Go's
/// field order (the order of the fields here), `null` for absent options, `controllerRevision`
/// omitted when empty.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HashEntry {
    /// `null` for entries converted from the old `{name: "hash"}` format.
    #[serde(default)]
    pub update_timestamp: Option<String>,
    #[serde(default)]
    pub hash: String,
    #[serde(default)]
    pub sidecar_set_name: String,
    /// `null` for old-format entries; an array (maybe empty) for entries the webhook wrote.
    #[serde(default)]
    pub sidecar_list: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub controller_revision: String,
}

impl HashEntry {
    /// Same content apart from the timestamp.
    fn same_as(&self, other: &HashEntry) -> bool {
        self.hash == other.hash
            && self.sidecar_set_name == other.sidecar_set_name
            && self.sidecar_list == other.sidecar_list
            && self.controller_revision == other.controller_revision
    }
}

/// A hash map annotation: SidecarSet name → entry.
pub type HashEntries = BTreeMap<String, HashEntry>;

/// Parse a hash annotation: the struct map first, then the old `{name: "hash"}` format. Anything
/// else is an error (Kruise rejects the pod).
pub fn parse_hash_map(key: &str, raw: Option<&str>) -> Result<HashEntries, String> {
    let Some(raw) = raw.filter(|r| !r.is_empty()) else { return Ok(BTreeMap::new()) };
    if let Ok(map) = serde_json::from_str::<HashEntries>(raw) {
        return Ok(map);
    }
    match serde_json::from_str::<BTreeMap<String, String>>(raw) {
        Ok(old) => Ok(old
            .into_iter()
            .map(|(name, hash)| {
                let entry = HashEntry {
                    update_timestamp: None,
                    hash,
                    sidecar_set_name: name.clone(),
                    sidecar_list: None,
                    controller_revision: String::new(),
                };
                (name, entry)
            })
            .collect()),
        Err(_) => Err(format!(
            "the pod's annotation {key} is neither a map of SidecarSet entries nor the old {{name: hash}} format; remove or fix it \
             (value: {raw})"
        )),
    }
}

/// Replace `name`'s entry with `new`, keeping the old timestamp when nothing else changed (so a
/// re-invoked webhook produces no patch; docs/sidecarset.md#7-pod-annotations).
pub fn upsert(map: &mut HashEntries, name: &str, mut new: HashEntry) {
    if let Some(old) = map.get(name)
        && old.same_as(&new)
        && old.update_timestamp.is_some()
    {
        new.update_timestamp = old.update_timestamp.clone();
    }
    map.insert(name.to_owned(), new);
}

/// Compact JSON, keys sorted (BTreeMap order), entries in Go field order: what `serde_json` writes
/// for the map (a test holds them equal), by hand because every injecting pod writes two of these and
/// serde's per-byte escaping was most of their cost.
pub fn write_hash_map(map: &HashEntries) -> String {
    let mut out = String::with_capacity(map.len() * 256);
    out.push('{');
    for (i, (name, entry)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_string(&mut out, name);
        out.push_str(":{\"updateTimestamp\":");
        match &entry.update_timestamp {
            Some(timestamp) => push_string(&mut out, timestamp),
            None => out.push_str("null"),
        }
        out.push_str(",\"hash\":");
        push_string(&mut out, &entry.hash);
        out.push_str(",\"sidecarSetName\":");
        push_string(&mut out, &entry.sidecar_set_name);
        out.push_str(",\"sidecarList\":");
        match &entry.sidecar_list {
            Some(list) => {
                out.push('[');
                for (j, sidecar) in list.iter().enumerate() {
                    if j > 0 {
                        out.push(',');
                    }
                    push_string(&mut out, sidecar);
                }
                out.push(']');
            }
            None => out.push_str("null"),
        }
        if !entry.controller_revision.is_empty() {
            out.push_str(",\"controllerRevision\":");
            push_string(&mut out, &entry.controller_revision);
        }
        out.push('}');
    }
    out.push('}');
    out
}

/// `{"key":"value",...}` in key order, as `serde_json` writes the map (the working-hotupgrade annotation).
fn write_string_map(map: &BTreeMap<String, String>) -> String {
    let mut out = String::from("{");
    for (i, (key, value)) in map.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_string(&mut out, key);
        out.push(':');
        push_string(&mut out, value);
    }
    out.push('}');
    out
}

/// Kruise's annotations as they stand on the pod, updated while SidecarSets are built.
#[derive(Debug, Default)]
pub struct PodAnnotations {
    pub hash: HashEntries,
    pub hash_without_image: HashEntries,
    pub injected: BTreeSet<String>,
    /// Parsed `working-hotupgrade-container`; an unparsable value counts as empty.
    pub working_hot: BTreeMap<String, String>,
    /// The pod's working-hotupgrade annotation was present but not a `{string: string}` map.
    pub working_hot_unparsable: bool,
    pub hot_upgrade_used: bool,
}

impl PodAnnotations {
    pub fn read(annotations: Option<&Object<'_>>) -> Result<Self, String> {
        let get = |k: &str| annotations.and_then(|a| a.get(k)).and_then(Json::as_str);
        let working_hot: Option<BTreeMap<String, String>> = get(WORKING_HOTUPGRADE_CONTAINER_ANNOTATION)
            .map(|w| serde_json::from_str(w).ok())
            .unwrap_or(Some(BTreeMap::new()));
        Ok(PodAnnotations {
            hash: parse_hash_map(HASH_ANNOTATION, get(HASH_ANNOTATION))?,
            hash_without_image: parse_hash_map(
                HASH_WITHOUT_IMAGE_ANNOTATION,
                get(HASH_WITHOUT_IMAGE_ANNOTATION),
            )?,
            injected: get(INJECTED_LIST_ANNOTATION)
                .map(|l| l.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect())
                .unwrap_or_default(),
            working_hot_unparsable: working_hot.is_none(),
            working_hot: working_hot.unwrap_or_default(),
            hot_upgrade_used: false,
        })
    }

    /// The annotations to write over the pod's (docs/sidecarset.md#6-6-annotations-written).
    pub fn write(&self, out: &mut Object<'_>) {
        out.insert(HASH_ANNOTATION, Json::from(write_hash_map(&self.hash)));
        out.insert(HASH_WITHOUT_IMAGE_ANNOTATION, Json::from(write_hash_map(&self.hash_without_image)));
        let list: Vec<&str> = self.injected.iter().map(String::as_str).collect();
        out.insert(INJECTED_LIST_ANNOTATION, Json::from(list.join(",")));
        if self.hot_upgrade_used {
            out.insert(
                WORKING_HOTUPGRADE_CONTAINER_ANNOTATION,
                Json::from(write_string_map(&self.working_hot)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_format_becomes_entries_with_nulls() {
        let map = parse_hash_map(HASH_ANNOTATION, Some(r#"{"s1":"abc"}"#)).unwrap();
        assert_eq!(
            write_hash_map(&map),
            r#"{"s1":{"updateTimestamp":null,"hash":"abc","sidecarSetName":"s1","sidecarList":null}}"#
        );
    }

    #[test]
    fn neither_format_is_an_error() {
        assert!(parse_hash_map(HASH_ANNOTATION, Some("not json")).is_err());
        assert!(parse_hash_map(HASH_ANNOTATION, Some(r#"{"s1":5}"#)).is_err());
        assert!(parse_hash_map(HASH_ANNOTATION, Some("")).unwrap().is_empty());
    }

    #[test]
    fn hash_maps_are_written_as_serde_json_writes_them() {
        let entry =
            |timestamp: Option<&str>, name: &str, list: Option<Vec<&str>>, revision: &str| HashEntry {
                update_timestamp: timestamp.map(str::to_owned),
                hash: format!("hash-of-{name}"),
                sidecar_set_name: name.to_owned(),
                sidecar_list: list.map(|l| l.into_iter().map(str::to_owned).collect()),
                controller_revision: revision.to_owned(),
            };
        let maps = [
            BTreeMap::new(),
            BTreeMap::from([("a".to_owned(), entry(Some("2026-01-01T00:00:00Z"), "a", Some(vec![]), ""))]),
            BTreeMap::from([
                ("b".to_owned(), entry(None, "b", None, "")),
                (
                    "c\"q\\\n\u{1}é".to_owned(),
                    entry(Some("t"), "c\"\u{7f}<&>", Some(vec!["x", "y\t"]), "rev-1"),
                ),
                ("d".to_owned(), entry(Some(""), "", Some(vec!["only"]), "r")),
            ]),
        ];
        for map in maps {
            assert_eq!(write_hash_map(&map), serde_json::to_string(&map).unwrap());
        }
        let working = BTreeMap::from([
            ("envoy".to_owned(), "envoy-1".to_owned()),
            ("a\"\n".to_owned(), "b\\".to_owned()),
        ]);
        for map in [BTreeMap::new(), working] {
            assert_eq!(write_string_map(&map), serde_json::to_string(&map).unwrap());
        }
    }

    #[test]
    fn timestamp_kept_only_when_nothing_else_changed() {
        let entry = |ts: &str, hash: &str| HashEntry {
            update_timestamp: Some(ts.into()),
            hash: hash.into(),
            sidecar_set_name: "s".into(),
            sidecar_list: Some(vec![]),
            controller_revision: String::new(),
        };
        let mut map = BTreeMap::from([("s".to_owned(), entry("2020-01-01T00:00:00Z", "h"))]);
        upsert(&mut map, "s", entry("2026-01-01T00:00:00Z", "h"));
        assert_eq!(map["s"].update_timestamp.as_deref(), Some("2020-01-01T00:00:00Z"));
        upsert(&mut map, "s", entry("2026-01-01T00:00:00Z", "h2"));
        assert_eq!(map["s"].update_timestamp.as_deref(), Some("2026-01-01T00:00:00Z"));
    }
}
