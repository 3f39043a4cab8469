//! What `dry-run` reads: files, folders (recursively, in path order) and `-`, holding
//! AdmissionReviews, bare Kubernetes objects or Kubernetes audit events, as JSON, JSON lines or
//! (multi-document) YAML, with `List` kinds expanded.
//!
//! Each document becomes a [`Case`]: a review replayed as recorded, a request built from a bare
//! object (a CREATE by an ordinary user) or from an audit event, or a skipped audit event.

use std::collections::{BTreeMap, HashMap};
use std::io::Read as _;
use std::path::Path;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::admission::review::{AdmissionRequest, Gvk, Gvr, Operation, ReviewVersion};
use crate::admission::webhooks;
use crate::api::tree::Json;
use crate::cluster::files::{expand_list, object_files, read_documents};

/// The files an input argument stands for: itself, every `.yaml`/`.yml`/`.json` file below a
/// folder in path order, or `-`.
pub fn expand(input: &str) -> Result<Vec<String>, String> {
    let path = Path::new(input);
    if input != "-" && path.is_dir() {
        let files = object_files(path).map_err(|e| e.to_string())?;
        return Ok(files.into_iter().map(|p| p.display().to_string()).collect());
    }
    Ok(vec![input.to_owned()])
}

/// The whole text of one input file, or standard input for `-`.
pub fn read_text(input: &str) -> Result<String, String> {
    if input == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(text)
    } else {
        std::fs::read_to_string(input).map_err(|e| format!("cannot read: {e}"))
    }
}

/// Call `each(index, several, document)` for every document of `text` in order. JSON (one value,
/// concatenated values or JSON lines such as an audit log) is parsed as a stream, so a large log
/// is never held as values all at once; an error stops the input at the bad document (the ones
/// before it have been handled). YAML is parsed whole: an error means no document is handled.
/// `several` tells whether the input has more than one document.
pub fn for_each_document(text: &str, mut each: impl FnMut(usize, bool, Value)) -> Result<(), String> {
    if !text.trim_start().starts_with('{') {
        let documents = read_documents(text)?;
        if documents.is_empty() {
            return Err("document 0: no document in the input".into());
        }
        let several = documents.len() > 1;
        for (index, document) in documents.into_iter().enumerate() {
            each(index, several, document);
        }
        return Ok(());
    }
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>().peekable();
    let mut index = 0;
    while let Some(next) = stream.next() {
        let value = next.map_err(|e| format!("document {index}: invalid JSON: {e}"))?;
        if !value.is_object() {
            return Err(format!(
                "document {index} is not an object: expected an AdmissionReview, an audit event or a Kubernetes object"
            ));
        }
        let mut items = Vec::new();
        expand_list(value, &mut items);
        let several = index > 0 || items.len() > 1 || stream.peek().is_some();
        for item in items {
            each(index, several, item);
            index += 1;
        }
    }
    Ok(())
}

/// What one document asks `dry-run` to do.
#[derive(Debug)]
pub enum Case {
    /// An AdmissionReview, replayed as recorded (decoding errors answer like `serve`).
    Review(Value),
    /// A request built from a bare object or an audit event.
    Request(Box<AdmissionRequest<'static>>),
    /// An audit event that is not replayed, and why.
    Skip(Skip),
}

/// Why an audit event is not replayed; the totals count each reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Skip {
    /// `get`, `list`, `watch`, `deletecollection`, ...: no single object is admitted.
    Verb,
    /// No webhook of this binary receives the resource and operation.
    NotAdmitted,
    /// `patch` events record the patch body, not the object the webhooks would see.
    Patch,
    /// Only `ResponseComplete` events are replayed, so each request counts once.
    Stage,
    /// The event has no `requestObject` (logged below the RequestResponse level).
    NoObject,
    /// UPDATE and DELETE need the object as it was; audit events do not carry it, so it comes
    /// from an earlier event of the same log, and there was none.
    NoOldObject,
}

impl Skip {
    pub fn describe(self) -> &'static str {
        match self {
            Skip::Verb => "verb without an object to admit (get, list, watch, ...)",
            Skip::NotAdmitted => "resource or operation no webhook of this binary receives",
            Skip::Patch => "patch (the event records the patch, not the object)",
            Skip::Stage => "stage other than ResponseComplete",
            Skip::NoObject => "no requestObject (logged below RequestResponse)",
            Skip::NoOldObject => "update or delete of an object not seen earlier in the log",
        }
    }
}

/// Counts of skipped audit events by reason.
pub type Skipped = BTreeMap<Skip, usize>;

/// Turns documents into cases. Holds what the audit log has shown so far: the last state of each
/// object an UPDATE or DELETE webhook of this binary may need as `oldObject`.
#[derive(Default)]
pub struct Classifier {
    /// (group, resource, namespace, name) -> the object after the last event that stored it.
    last_seen: HashMap<(String, String, String, String), Value>,
    /// Whether any webhook receives UPDATE or DELETE for (group, version, resource).
    needs_old: HashMap<(String, String, String), bool>,
}

impl Classifier {
    /// Classify one document of `source` (its index in the input names the request's uid).
    pub fn classify(&mut self, document: Value, source: &str) -> Result<Case, String> {
        let api_version = document.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = document.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kind == "AdmissionReview"
            || api_version.starts_with("admission.k8s.io/")
            || document.get("request").is_some()
        {
            return Ok(Case::Review(document));
        }
        if api_version.starts_with("audit.k8s.io/") && kind == "Event" {
            return self.audit_event(document);
        }
        if api_version.is_empty() || kind.is_empty() {
            return Err("expected an AdmissionReview, an audit.k8s.io/v1 Event or a Kubernetes object with apiVersion and kind".into());
        }
        Ok(Case::Request(Box::new(bare_object(document, source))))
    }

    fn audit_event(&mut self, mut event: Value) -> Result<Case, String> {
        let operation = match audit_operation(&event) {
            Ok(operation) => operation,
            Err(skip) => return Ok(Case::Skip(skip)),
        };
        let mut request = audit_request(&event, operation)?;
        let (group, version, resource) =
            (&request.resource.group, &request.resource.version, &request.resource.resource);
        let remember = self.needs_old(group, version, resource);
        if webhooks::matching(&request).next().is_none() {
            if remember {
                self.remember(&event, operation, object_key(&request));
            }
            return Ok(Case::Skip(Skip::NotAdmitted));
        }
        let response =
            event.get_mut("responseObject").map(Value::take).filter(|r| is_object_of(r, &request.kind.kind));
        let object = event.get_mut("requestObject").map(Value::take).filter(|o| o.is_object());
        // A CREATE with generateName has no name in objectRef until the response names it.
        if request.name.is_empty()
            && let Some(n) =
                response.as_ref().and_then(|r| r.pointer("/metadata/name")).and_then(Value::as_str)
        {
            request.name = n.to_owned();
        }
        let key = object_key(&request);
        match operation {
            Operation::Create | Operation::Update => {
                let Some(object) = object else { return Ok(Case::Skip(Skip::NoObject)) };
                if let Some(kind) = object.get("kind").and_then(Value::as_str) {
                    request.kind.kind = kind.to_owned();
                }
                if operation == Operation::Update {
                    let Some(old) = self.last_seen.get(&key) else {
                        return Ok(Case::Skip(Skip::NoOldObject));
                    };
                    request.old_object = Some(Json::from(old.clone()));
                }
                if remember {
                    // What was stored: the response, or the request when the response is a Status.
                    self.last_seen.insert(key, response.unwrap_or_else(|| object.clone()));
                }
                request.object = Some(Json::from(object));
            }
            Operation::Delete | Operation::Connect => {
                // A graceful deletion answers with the object itself; others with a Status.
                let old = self.last_seen.remove(&key).or(response);
                let Some(old) = old else { return Ok(Case::Skip(Skip::NoOldObject)) };
                request.old_object = Some(Json::from(old));
            }
        }
        Ok(Case::Request(Box::new(request)))
    }

    /// Keep the stored state of an object whose later UPDATE or DELETE some webhook receives.
    fn remember(&mut self, event: &Value, operation: Operation, key: (String, String, String, String)) {
        if operation == Operation::Delete {
            self.last_seen.remove(&key);
        } else if let Some(stored) = event
            .get("responseObject")
            .or_else(|| event.get("requestObject"))
            .filter(|o| o.get("spec").is_some())
        {
            self.last_seen.insert(key, stored.clone());
        }
    }

    fn needs_old(&mut self, group: &str, version: &str, resource: &str) -> bool {
        let key = (group.to_owned(), version.to_owned(), resource.to_owned());
        *self.needs_old.entry(key).or_insert_with(|| {
            [Operation::Update, Operation::Delete].into_iter().any(|operation| {
                let probe = AdmissionRequest {
                    version: ReviewVersion::V1,
                    uid: String::new(),
                    kind: Gvk::default(),
                    resource: Gvr { group: group.into(), version: version.into(), resource: resource.into() },
                    sub_resource: String::new(),
                    name: String::new(),
                    namespace: String::new(),
                    operation,
                    object: None,
                    old_object: None,
                    dry_run: false,
                    decode_warnings: Vec::new(),
                };
                webhooks::matching(&probe).next().is_some()
            })
        })
    }
}

/// A string field of an audit event, empty when absent.
fn audit_text(value: &Value, pointer: &str) -> String {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// The operation an audit event replays, or why it is not replayed.
fn audit_operation(event: &Value) -> Result<Operation, Skip> {
    if audit_text(event, "/stage") != "ResponseComplete" {
        return Err(Skip::Stage);
    }
    match audit_text(event, "/verb").as_str() {
        "create" => Ok(Operation::Create),
        "update" => Ok(Operation::Update),
        "delete" => Ok(Operation::Delete),
        "patch" => Err(Skip::Patch),
        _ => Err(Skip::Verb),
    }
}

/// The request an audit event records, named by its `objectRef`, without its objects.
fn audit_request(event: &Value, operation: Operation) -> Result<AdmissionRequest<'static>, String> {
    let Some(object_ref) = event.get("objectRef").filter(|r| r.is_object()) else {
        return Err(
            "the audit event has no objectRef: expected resource, namespace and name of the object".into()
        );
    };
    let group = audit_text(object_ref, "/apiGroup");
    let version = audit_text(object_ref, "/apiVersion");
    let resource = audit_text(object_ref, "/resource");
    if resource.is_empty() || version.is_empty() {
        return Err("the audit event's objectRef has no resource or apiVersion".into());
    }
    Ok(AdmissionRequest {
        version: ReviewVersion::V1,
        uid: audit_text(event, "/auditID"),
        kind: Gvk {
            group: group.clone(),
            version: version.clone(),
            kind: kind_of(&group, &resource).unwrap_or_default().to_owned(),
        },
        resource: Gvr { group, version, resource },
        sub_resource: audit_text(object_ref, "/subresource"),
        name: audit_text(object_ref, "/name"),
        namespace: audit_text(object_ref, "/namespace"),
        operation,
        object: None,
        old_object: None,
        dry_run: false,
        decode_warnings: Vec::new(),
    })
}

/// The key [`Classifier`] remembers an object by: (group, resource, namespace, name).
fn object_key(request: &AdmissionRequest) -> (String, String, String, String) {
    let AdmissionRequest { resource, namespace, name, .. } = request;
    (resource.group.clone(), resource.resource.clone(), namespace.clone(), name.clone())
}

fn is_object_of(value: &Value, kind: &str) -> bool {
    value.get("kind").and_then(Value::as_str).is_some_and(|k| k != "Status" && (kind.is_empty() || k == kind))
}

/// (group, kind, resource, namespaced) for the kinds this binary's webhooks receive and the
/// workloads `inject` reads. Other kinds get the usual lower-case plural and count as namespaced.
const KINDS: &[(&str, &str, &str, bool)] = &[
    ("", "Pod", "pods", true),
    ("", "Namespace", "namespaces", false),
    ("", "Service", "services", true),
    ("", "ConfigMap", "configmaps", true),
    ("apps", "Deployment", "deployments", true),
    ("apps", "ReplicaSet", "replicasets", true),
    ("apps", "StatefulSet", "statefulsets", true),
    ("apps", "DaemonSet", "daemonsets", true),
    ("apps", "ControllerRevision", "controllerrevisions", true),
    ("batch", "Job", "jobs", true),
    ("batch", "CronJob", "cronjobs", true),
    ("networking.k8s.io", "Ingress", "ingresses", true),
    ("extensions", "Ingress", "ingresses", true),
    ("apiextensions.k8s.io", "CustomResourceDefinition", "customresourcedefinitions", false),
    ("apps.kruise.io", "SidecarSet", "sidecarsets", false),
    ("apps.kruise.io", "CloneSet", "clonesets", true),
    ("apps.kruise.io", "StatefulSet", "statefulsets", true),
    ("apps.kruise.io", "DaemonSet", "daemonsets", true),
    ("apps.kruise.io", "UnitedDeployment", "uniteddeployments", true),
    ("apps.kruise.io", "BroadcastJob", "broadcastjobs", true),
];

/// The resource (plural) and scope of `kind` in `group`.
pub fn resource_of(group: &str, kind: &str) -> (String, bool) {
    if let Some(&(_, _, resource, namespaced)) = KINDS.iter().find(|(g, k, _, _)| *g == group && *k == kind) {
        return (resource.to_owned(), namespaced);
    }
    let lower = kind.to_ascii_lowercase();
    let plural = if lower.ends_with('s') || lower.ends_with('x') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y').filter(|s| !s.ends_with(['a', 'e', 'o', 'u'])) {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    };
    (plural, true)
}

fn kind_of(group: &str, resource: &str) -> Option<&'static str> {
    KINDS.iter().find(|(g, _, r, _)| *g == group && *r == resource).map(|&(_, k, _, _)| k)
}

/// A CREATE of `object`, as the apiserver would send it for `kubectl create`.
/// The namespace is the object's, or `default` for a namespaced kind without one (kubectl's
/// default context namespace). The uid is derived from the source so runs are repeatable.
pub fn bare_object(object: Value, source: &str) -> AdmissionRequest<'static> {
    let text = |p: &str| object.pointer(p).and_then(Value::as_str).unwrap_or_default().to_owned();
    let api_version = text("/apiVersion");
    let (group, version) = api_version
        .rsplit_once('/')
        .map_or((String::new(), api_version.clone()), |(g, v)| (g.to_owned(), v.to_owned()));
    let kind = text("/kind");
    let (resource, namespaced) = resource_of(&group, &kind);
    let namespace = match text("/metadata/namespace") {
        ns if !namespaced => ns,
        ns if ns.is_empty() => "default".to_owned(),
        ns => ns,
    };
    AdmissionRequest {
        version: ReviewVersion::V1,
        uid: uid_for(source),
        kind: Gvk { group: group.clone(), version: version.clone(), kind },
        resource: Gvr { group, version, resource },
        sub_resource: String::new(),
        name: text("/metadata/name"),
        namespace,
        operation: Operation::Create,
        object: Some(Json::from(object)),
        old_object: None,
        dry_run: false,
        decode_warnings: Vec::new(),
    }
}

/// A UUID-shaped uid from the source name (`file#index`): the same input gives the same uid.
pub fn uid_for(source: &str) -> String {
    let digest = Sha256::digest(source.as_bytes());
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn docs(text: &str) -> Result<Vec<(usize, bool, Value)>, String> {
        let mut out = Vec::new();
        for_each_document(text, |i, several, d| out.push((i, several, d)))?;
        Ok(out)
    }

    #[test]
    fn json_lines_concatenated_json_and_lists_are_documents() {
        let got = docs(
            "{\"kind\": \"A\"}\n{\"kind\": \"List\", \"items\": [{\"kind\": \"B\"}, {\"kind\": \"C\"}]}\n",
        )
        .unwrap();
        assert_eq!(
            got.iter().map(|(i, s, d)| (*i, *s, d["kind"].as_str().unwrap())).collect::<Vec<_>>(),
            [(0, true, "A"), (1, true, "B"), (2, true, "C")]
        );
        assert!(!docs("{\"kind\": \"A\"}").unwrap()[0].1);
        let err = docs("{\"kind\": \"A\"}\n{\"kind\": \n").unwrap_err();
        assert!(err.starts_with("document 1: invalid JSON") && err.contains("line 3"), "{err}");
        assert!(docs("{\"a\":1}\n[1]\n").unwrap_err().contains("document 1 is not an object"));
        assert!(docs("").unwrap_err().contains("no document"));
    }

    #[test]
    fn a_bare_object_is_a_create_by_an_ordinary_user() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
        let r = bare_object(pod.clone(), "pods.yaml#2");
        assert_eq!((r.operation, r.namespace.as_str(), r.name.as_str()), (Operation::Create, "default", "p"));
        assert_eq!(r.resource, Gvr { group: String::new(), version: "v1".into(), resource: "pods".into() });
        assert_eq!(r.uid, bare_object(pod.clone(), "pods.yaml#2").uid);
        assert_ne!(r.uid, bare_object(pod, "pods.yaml#3").uid);
        let set =
            json!({"apiVersion": "apps.kruise.io/v1alpha1", "kind": "SidecarSet", "metadata": {"name": "s"}});
        let r = bare_object(set, "s");
        assert_eq!(
            (r.resource.group.as_str(), r.resource.resource.as_str(), r.namespace.as_str()),
            ("apps.kruise.io", "sidecarsets", "")
        );
        assert_eq!(resource_of("example.com", "Policy").0, "policies");
        assert_eq!(resource_of("example.com", "Gateway").0, "gateways");
        assert_eq!(resource_of("example.com", "Ingress").0, "ingresses");
    }

    fn event(verb: &str, resource: &str, name: &str, request: Value, response: Value) -> Value {
        json!({
            "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "RequestResponse", "auditID": format!("id-{verb}-{name}"),
            "stage": "ResponseComplete", "verb": verb,
            "user": {"username": "alice", "groups": ["dev"]},
            "objectRef": {"resource": resource, "namespace": "shop", "name": name, "apiVersion": "v1"},
            "requestObject": request, "responseObject": response,
        })
    }

    #[test]
    fn audit_events_become_requests_or_counted_skips() {
        let mut c = Classifier::default();
        let pod =
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "web-"}, "spec": {}});
        let stored = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-1"}, "spec": {}});
        let mut create = event("create", "pods", "", pod.clone(), stored);
        let Ok(Case::Request(r)) = c.classify(create.clone(), "log#0") else {
            panic!("a pod create is replayed")
        };
        assert_eq!(
            (r.uid.as_str(), r.operation, r.name.as_str(), r.namespace.as_str()),
            ("id-create-", Operation::Create, "web-1", "shop")
        );
        assert_eq!(r.kind.kind, "Pod");
        assert_eq!(r.object, Some(Json::from(pod.clone())));
        create["stage"] = json!("RequestReceived");
        assert!(matches!(c.classify(create, "log#0"), Ok(Case::Skip(Skip::Stage))));
        let get = event("get", "pods", "web-1", Value::Null, Value::Null);
        assert!(matches!(c.classify(get, "log#1"), Ok(Case::Skip(Skip::Verb))));
        let patch = event("patch", "pods", "web-1", json!({"metadata": {}}), Value::Null);
        assert!(matches!(c.classify(patch, "log#2"), Ok(Case::Skip(Skip::Patch))));
        // No webhook receives pod status updates or config map creates.
        let mut update = event("update", "pods", "web-1", pod, Value::Null);
        update["objectRef"]["subresource"] = json!("status");
        assert!(matches!(c.classify(update, "log#3"), Ok(Case::Skip(Skip::NotAdmitted))));
        let cm =
            event("create", "configmaps", "c", json!({"apiVersion": "v1", "kind": "ConfigMap"}), Value::Null);
        assert!(matches!(c.classify(cm, "log#4"), Ok(Case::Skip(Skip::NotAdmitted))));
        let mut no_ref = event("create", "pods", "x", json!({}), Value::Null);
        no_ref.as_object_mut().unwrap().remove("objectRef");
        assert!(c.classify(no_ref, "log#5").unwrap_err().contains("objectRef"));
    }

    #[test]
    fn a_delete_replays_with_the_state_the_log_showed_earlier() {
        let mut c = Classifier::default();
        let service = |labels: Value| json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "shop", "labels": labels}, "spec": {}});
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Success"});
        // Delete of an object the log never showed, answered with a Status: nothing to replay.
        let delete = event("delete", "services", "s", json!({"kind": "DeleteOptions"}), status.clone());
        assert!(matches!(c.classify(delete.clone(), "log#0"), Ok(Case::Skip(Skip::NoOldObject))));
        // Its create is not admitted (services are only checked on DELETE) but remembered.
        let created = service(json!({"policy.kruise.io/delete-protection": "Always"}));
        let create = event("create", "services", "s", created.clone(), created.clone());
        assert!(matches!(c.classify(create, "log#1"), Ok(Case::Skip(Skip::NotAdmitted))));
        let Ok(Case::Request(r)) = c.classify(delete.clone(), "log#2") else {
            panic!("the delete is replayed")
        };
        assert_eq!((r.operation, r.old_object.as_ref()), (Operation::Delete, Some(&Json::from(created))));
        assert!(r.object.is_none());
        // Deleted: a second delete has nothing to go on again.
        assert!(matches!(c.classify(delete, "log#3"), Ok(Case::Skip(Skip::NoOldObject))));
    }

    #[test]
    fn documents_that_are_none_of_the_shapes_say_what_was_expected() {
        let mut c = Classifier::default();
        let err = c.classify(json!({"metadata": {"name": "x"}}), "f").err().unwrap();
        assert!(err.contains("expected an AdmissionReview"), "{err}");
        assert!(matches!(c.classify(json!({"apiVersion": "admission.k8s.io/v1"}), "f"), Ok(Case::Review(_))));
    }
}
