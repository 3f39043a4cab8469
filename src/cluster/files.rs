//! Cluster objects from a folder of YAML/JSON files: the embedded default of `serve` and the
//! `--cluster-dir` of `dry-run`. Also the one document reader every file input goes through.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::Snapshot;
use crate::api::sidecarset::{GROUP, KIND};
use crate::api::sidecarset_fields;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {message}")]
    Read { path: PathBuf, message: String },
}

/// An object of a cluster folder and the file it came from.
pub type Loaded = (PathBuf, Value);

/// Parse a file's text into objects: JSON (one value) or YAML (one or more `---` documents).
/// `List` kinds (`v1/List`, `*List`) are expanded into their items; empty documents are dropped.
/// Errors name the document index so a person can find the bad one.
pub fn read_documents(text: &str) -> Result<Vec<Value>, String> {
    let trimmed = text.trim_start();
    let docs: Vec<Value> = if trimmed.starts_with('{') || trimmed.starts_with('[') {
        vec![serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?]
    } else {
        serde_saphyr::from_multiple::<Value>(text).map_err(|e| format!("invalid YAML: {e}"))?
    };
    let mut out = Vec::with_capacity(docs.len());
    for (index, doc) in docs.into_iter().enumerate() {
        match doc {
            Value::Null => {}
            Value::Object(_) => expand_list(doc, &mut out),
            other => {
                let what = if other.is_array() { "an array" } else { "a scalar" };
                return Err(format!("document {index} is {what}, expected an object"));
            }
        }
    }
    Ok(out)
}

/// Push `doc`, or the items of a `List` kind (recursively), onto `out`.
pub fn expand_list(doc: Value, out: &mut Vec<Value>) {
    let is_list = doc.get("kind").and_then(Value::as_str).is_some_and(|k| k.ends_with("List"))
        && doc.get("items").is_some_and(Value::is_array);
    if !is_list {
        out.push(doc);
        return;
    }
    if let Value::Object(mut map) = doc
        && let Some(Value::Array(items)) = map.remove("items")
    {
        for item in items {
            expand_list(item, out);
        }
    }
}

/// Every `.yaml`, `.yml` and `.json` file below `dir`, in path order (so loading is deterministic).
pub fn object_files(dir: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| LoadError::Read { path: d.clone(), message: e.to_string() })?;
        for entry in entries {
            let entry = entry.map_err(|e| LoadError::Read { path: d.clone(), message: e.to_string() })?;
            let path = entry.path();
            // Kubernetes Secret and ConfigMap volumes keep their data in `..data`-style hidden dirs
            // behind symlinks; following only visible names avoids loading each file twice.
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml" | "json")) {
                files.push(path);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Load every object below `dir` into a snapshot. Objects without apiVersion, kind or
/// metadata.name cannot be addressed; they are skipped and reported in the returned warnings.
pub fn load_dir(dir: &Path) -> Result<(Snapshot, Vec<String>), LoadError> {
    let (objects, warnings) = load_objects(dir)?;
    Ok((Snapshot::from_objects(objects.into_iter().map(|(_, object)| object)), warnings))
}

/// The addressable objects below `dir` (a folder, or one file) in load order, each with its file,
/// and warnings for the skipped ones and for SidecarSets with unknown fields or fields Kruise
/// refuses together (`api::sidecarset_fields`: nothing checked their schema). `dry-run` and
/// `inject` admit them (`cli::cluster_folder`), and layer `--with` lists over them.
pub fn load_objects(dir: &Path) -> Result<(Vec<Loaded>, Vec<String>), LoadError> {
    let files = if dir.is_dir() { object_files(dir)? } else { vec![dir.to_path_buf()] };
    let mut objects = Vec::new();
    let mut warnings = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| LoadError::Read { path: path.clone(), message: e.to_string() })?;
        let docs =
            read_documents(&text).map_err(|message| LoadError::Read { path: path.clone(), message })?;
        for (index, doc) in docs.into_iter().enumerate() {
            if super::TypeKey::of(&doc).is_none() || super::ObjectKey::of(&doc).is_none() {
                warnings.push(format!(
                    "{}: object {index} has no apiVersion, kind or metadata.name; skipped",
                    path.display()
                ));
                continue;
            }
            if super::TypeKey::of(&doc).is_some_and(|t| t.group == GROUP && t.kind == KIND) {
                let name = doc.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
                for finding in sidecarset_fields::findings(&doc) {
                    warnings.push(format!("{}: SidecarSet {name}: {finding}", path.display()));
                }
            }
            objects.push((path.clone(), doc));
        }
    }
    Ok((objects, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_json_yaml_multi_documents_and_lists() {
        assert_eq!(read_documents(r#"{"kind": "A"}"#).unwrap().len(), 1);
        let yaml = "kind: A\n---\n---\nkind: List\napiVersion: v1\nitems:\n- kind: B\n- kind: C\n";
        let docs = read_documents(yaml).unwrap();
        assert_eq!(docs.iter().map(|d| d["kind"].as_str().unwrap()).collect::<Vec<_>>(), ["A", "B", "C"]);
        assert!(read_documents("- 1\n- 2\n").unwrap_err().contains("document 0"));
        assert!(read_documents("{not json").is_err());
    }

    #[test]
    fn loads_a_folder_and_reports_unaddressable_objects() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.yaml"),
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n---\nkind: Nameless\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(
            dir.path().join("sub/b.json"),
            r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"y"}}"#,
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let (snapshot, warnings) = load_dir(dir.path()).unwrap();
        assert_eq!(snapshot.len(), 2);
        assert_eq!(warnings.len(), 1);
    }
}
