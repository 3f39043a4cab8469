//! A STAND-IN for kube-apiserver, for tests only: loopback HTTPS with a CA generated per test,
//! serving discovery, list and watch (bookmarks, `410 Gone` on a compacted resourceVersion,
//! abruptly dropped connections), and GET/POST/PUT/PATCH with resourceVersion conflict semantics,
//! from JSON shaped like the real API's responses. There is no real API server on the machines
//! these tests run on; this is the closest honest substitute, not a Kubernetes implementation.
#![allow(dead_code)] // each test crate uses a different subset

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// One resource the stand-in serves.
#[derive(Debug, Clone)]
pub struct Resource {
    pub group: &'static str,
    pub versions: Vec<&'static str>,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
    /// Custom resources keep apiVersion/kind on list items; built-in types do not.
    pub custom: bool,
}

/// The default set: core Namespaces, ConfigMaps, Secrets, Pods, PVCs; apps ControllerRevisions;
/// Kruise SidecarSets and CloneSets at the given versions; webhook configurations.
pub fn resources(kruise_versions: &[&'static str]) -> Vec<Resource> {
    let r = |group, versions: Vec<&'static str>, kind, plural, namespaced, custom| Resource {
        group,
        versions,
        kind,
        plural,
        namespaced,
        custom,
    };
    let mut out = vec![
        r("", vec!["v1"], "Namespace", "namespaces", false, false),
        r("", vec!["v1"], "ConfigMap", "configmaps", true, false),
        r("", vec!["v1"], "Secret", "secrets", true, false),
        r("", vec!["v1"], "Pod", "pods", true, false),
        r("", vec!["v1"], "PersistentVolumeClaim", "persistentvolumeclaims", true, false),
        r("apps", vec!["v1"], "ControllerRevision", "controllerrevisions", true, false),
        r(
            "admissionregistration.k8s.io",
            vec!["v1"],
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            false,
            false,
        ),
        r(
            "admissionregistration.k8s.io",
            vec!["v1"],
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            false,
            false,
        ),
    ];
    if !kruise_versions.is_empty() {
        out.push(r("apps.kruise.io", kruise_versions.to_vec(), "SidecarSet", "sidecarsets", false, true));
        out.push(r("apps.kruise.io", kruise_versions.to_vec(), "CloneSet", "clonesets", true, true));
    }
    out
}

/// [`resources`] with Kruise's CloneSets at v1alpha1 and its other kinds at v1beta1, plus what
/// `/mutate-pod`'s related-pub and WorkloadSpread steps watch (PodUnavailableBudgets,
/// WorkloadSpreads and the workloads they read) and what steps 6 and 7 watch (PersistentPodStates,
/// PodProbeMarkers).
pub fn resources_with_pubs() -> Vec<Resource> {
    let mut out = resources(&["v1alpha1", "v1beta1"]);
    let r = |group, versions, kind, plural, custom| Resource {
        group,
        versions,
        kind,
        plural,
        namespaced: true,
        custom,
    };
    out.push(r("policy.kruise.io", vec!["v1alpha1"], "PodUnavailableBudget", "podunavailablebudgets", true));
    out.push(r("apps", vec!["v1"], "Deployment", "deployments", false));
    out.push(r("apps", vec!["v1"], "ReplicaSet", "replicasets", false));
    out.push(r("apps", vec!["v1"], "StatefulSet", "statefulsets", false));
    out.push(r("apps.kruise.io", vec!["v1beta1"], "StatefulSet", "statefulsets", true));
    out.push(r("apps.kruise.io", vec!["v1alpha1"], "WorkloadSpread", "workloadspreads", true));
    out.push(r("batch", vec!["v1"], "Job", "jobs", false));
    out.push(r("apps.kruise.io", vec!["v1alpha1"], "PersistentPodState", "persistentpodstates", true));
    out.push(r("apps.kruise.io", vec!["v1alpha1"], "PodProbeMarker", "podprobemarkers", true));
    out
}

#[derive(Clone, Debug)]
struct WatchEvent {
    rv: u64,
    group: &'static str,
    plural: &'static str,
    namespace: String,
    name: String,
    kind: &'static str,
    object: Value,
}

/// Objects of one resource by (namespace, name).
type Objects = BTreeMap<(String, String), Value>;

#[derive(Default)]
struct Store {
    rv: u64,
    /// Watches from a resourceVersion below this get `410 Gone` (etcd compaction).
    compacted: u64,
    objects: HashMap<(&'static str, &'static str), Objects>,
    history: Vec<WatchEvent>,
    forbidden: HashSet<(String, String)>,
    requests: HashMap<(String, String), usize>,
    uid: u64,
    /// Added before answering get and list requests (a slow API server).
    delay: Duration,
    /// The decoded query parameters of every request, by (verb, plural), in arrival order.
    params: HashMap<(String, String), Vec<BTreeMap<String, String>>>,
    /// get and list requests being answered now, and the most there ever were at once.
    in_flight: usize,
    max_in_flight: usize,
}

struct Inner {
    resources: Vec<Resource>,
    store: Mutex<Store>,
    events: broadcast::Sender<WatchEvent>,
    /// Every send closes all open watch streams abruptly.
    drops: broadcast::Sender<()>,
    bookmark_every: Duration,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap()
    }

    fn resource(&self, group: &str, version: &str, plural: &str) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.plural == plural && r.versions.contains(&version))
    }
}

pub struct FakeApiServer {
    pub addr: SocketAddr,
    pub ca_pem: String,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeApiServer {
    /// Serve SidecarSets at v1beta1 and v1alpha1.
    pub async fn start() -> Self {
        Self::start_with(resources(&["v1beta1", "v1alpha1"])).await
    }

    pub async fn start_with(resources: Vec<Resource>) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.distinguished_name.push(rcgen::DnType::CommonName, "fake-apiserver-ca");
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca_params, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let params =
            rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()]).unwrap();
        let cert = params.signed_by(&key, &issuer).unwrap();
        let tls = rustls::ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(
                vec![cert.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let inner = Arc::new(Inner {
            resources,
            store: Mutex::new(Store { rv: 100, ..Store::default() }),
            events: broadcast::channel(1024).0,
            drops: broadcast::channel(16).0,
            bookmark_every: Duration::from_millis(100),
        });
        let router = axum::Router::new().fallback(handle).with_state(Arc::clone(&inner));
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                let acceptor = acceptor.clone();
                let router = router.clone();
                tokio::spawn(async move {
                    let Ok(stream) = acceptor.accept(tcp).await else { return };
                    let service = hyper_util::service::TowerToHyperService::new(router);
                    let _ =
                        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new())
                            .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                            .await;
                });
            }
        });
        FakeApiServer { addr, ca_pem: ca_cert.pem(), inner, task }
    }

    /// A kube client that trusts only this server's CA.
    pub fn client(&self) -> kube::Client {
        let url: axum::http::Uri = format!("https://{}", self.addr).parse().unwrap();
        let mut config = kube::Config::new(url);
        config.root_cert = Some(vec![pem_to_der(&self.ca_pem)]);
        config.default_namespace = "default".into();
        kube::Client::try_from(config).unwrap()
    }

    /// Write a kubeconfig for this server (trusting only its CA) into `dir`, for tests that run
    /// the binary; returns its path.
    pub fn write_kubeconfig(&self, dir: &std::path::Path) -> std::path::PathBuf {
        use base64::Engine as _;
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: https://{}\n    certificate-authority-data: {ca}\n\
             users:\n- name: fake\n  user:\n    token: fake\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\n",
            self.addr
        );
        let path = dir.join("kubeconfig");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Create or replace an object as a controller would (ADDED / MODIFIED event). Returns it as
    /// stored (resourceVersion set).
    pub fn apply(&self, object: Value) -> Value {
        let (group, version) = split_api_version(object["apiVersion"].as_str().unwrap());
        let kind = object["kind"].as_str().unwrap();
        let resource = self
            .inner
            .resources
            .iter()
            .find(|r| r.group == group && r.kind == kind && r.versions.contains(&version))
            .unwrap()
            .clone();
        let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default().to_owned();
        let mut store = self.inner.lock();
        let existed = store
            .objects
            .get(&(resource.group, resource.plural))
            .is_some_and(|m| m.contains_key(&(namespace.clone(), name_of(&object))));
        write(
            &self.inner,
            &mut store,
            &resource,
            &namespace,
            object,
            if existed { "MODIFIED" } else { "ADDED" },
        )
    }

    /// Delete an object (DELETED event).
    pub fn delete(&self, group: &str, plural: &str, namespace: &str, name: &str) {
        let resource =
            self.inner.resources.iter().find(|r| r.group == group && r.plural == plural).unwrap().clone();
        let mut store = self.inner.lock();
        let Some(mut object) = store
            .objects
            .get_mut(&(resource.group, resource.plural))
            .and_then(|m| m.remove(&(namespace.to_owned(), name.to_owned())))
        else {
            return;
        };
        store.rv += 1;
        object["metadata"]["resourceVersion"] = json!(store.rv.to_string());
        record(&self.inner, &mut store, &resource, namespace, object, "DELETED");
    }

    pub fn get(&self, group: &str, plural: &str, namespace: &str, name: &str) -> Option<Value> {
        let r = self.inner.resources.iter().find(|r| r.group == group && r.plural == plural)?;
        self.inner
            .lock()
            .objects
            .get(&(r.group, r.plural))
            .and_then(|m| m.get(&(namespace.to_owned(), name.to_owned())))
            .cloned()
    }

    /// Forget history: a watch from any resourceVersion seen so far now gets `410 Gone`.
    pub fn compact(&self) {
        let mut store = self.inner.lock();
        store.rv += 1;
        store.compacted = store.rv;
    }

    /// Cut every open watch connection without a clean end of stream.
    pub fn drop_watches(&self) {
        let _ = self.inner.drops.send(());
    }

    /// Answer `verb` on `plural` with 403 Forbidden from now on.
    pub fn forbid(&self, verb: &str, plural: &str) {
        self.inner.lock().forbidden.insert((verb.to_owned(), plural.to_owned()));
    }

    /// Answer get and list requests only after `delay`.
    pub fn slow_down(&self, delay: Duration) {
        self.inner.lock().delay = delay;
    }

    pub fn allow(&self, verb: &str, plural: &str) {
        self.inner.lock().forbidden.remove(&(verb.to_owned(), plural.to_owned()));
    }

    /// How many `verb` requests on `plural` arrived (verbs: get, list, watch, create, update, patch).
    pub fn requests(&self, verb: &str, plural: &str) -> usize {
        self.inner.lock().requests.get(&(verb.to_owned(), plural.to_owned())).copied().unwrap_or(0)
    }

    /// The query parameters of each `verb` request on `plural`, decoded, in arrival order.
    pub fn params(&self, verb: &str, plural: &str) -> Vec<BTreeMap<String, String>> {
        self.inner.lock().params.get(&(verb.to_owned(), plural.to_owned())).cloned().unwrap_or_default()
    }

    /// The most get and list requests that were being answered at the same time.
    pub fn max_in_flight(&self) -> usize {
        self.inner.lock().max_in_flight
    }

    /// create + update + patch requests on `plural`.
    pub fn writes(&self, plural: &str) -> usize {
        ["create", "update", "patch"].iter().map(|v| self.requests(v, plural)).sum()
    }
}

pub fn pem_to_der(pem: &str) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD.decode(body).unwrap()
}

fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

fn name_of(object: &Value) -> String {
    object["metadata"]["name"].as_str().unwrap_or_default().to_owned()
}

fn api_version(group: &str, version: &str) -> String {
    if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") }
}

/// Store `object` with a new resourceVersion and record the event.
fn write(
    inner: &Inner,
    store: &mut Store,
    resource: &Resource,
    namespace: &str,
    mut object: Value,
    event: &str,
) -> Value {
    store.rv += 1;
    let rv = store.rv;
    let existing = store
        .objects
        .get(&(resource.group, resource.plural))
        .and_then(|m| m.get(&(namespace.to_owned(), name_of(&object))))
        .cloned();
    let meta = object["metadata"].as_object_mut().unwrap();
    meta.insert("resourceVersion".into(), json!(rv.to_string()));
    if resource.namespaced {
        meta.insert("namespace".into(), json!(namespace));
    }
    match existing {
        Some(old) => {
            meta.insert("uid".into(), old["metadata"]["uid"].clone());
            meta.insert("creationTimestamp".into(), old["metadata"]["creationTimestamp"].clone());
        }
        None => {
            store.uid += 1;
            meta.insert("uid".into(), json!(format!("00000000-0000-4000-8000-{:012}", store.uid)));
            meta.insert("creationTimestamp".into(), json!("2026-01-01T00:00:00Z"));
        }
    }
    store
        .objects
        .entry((resource.group, resource.plural))
        .or_default()
        .insert((namespace.to_owned(), name_of(&object)), object.clone());
    record(inner, store, resource, namespace, object.clone(), event);
    object
}

fn record(
    inner: &Inner,
    store: &mut Store,
    resource: &Resource,
    namespace: &str,
    object: Value,
    event_type: &str,
) {
    let event = WatchEvent {
        rv: store.rv,
        group: resource.group,
        plural: resource.plural,
        namespace: namespace.to_owned(),
        name: name_of(&object),
        kind: resource.kind,
        object: json!({"type": event_type, "object": object}),
    };
    store.history.push(event.clone());
    let _ = inner.events.send(event);
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message, "reason": reason, "code": code});
    (StatusCode::from_u16(code).unwrap(), [("content-type", "application/json")], body.to_string())
        .into_response()
}

fn ok_json(value: Value) -> Response {
    (StatusCode::OK, [("content-type", "application/json")], value.to_string()).into_response()
}

/// `application/x-www-form-urlencoded` decoding of one query component.
fn url_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() && u8::from_str_radix(&text[i + 1..i + 3], 16).is_ok() => {
                out.push(u8::from_str_radix(&text[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

fn query_params(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (url_decode(k), url_decode(v)))
        .collect()
}

fn query_param(uri: &Uri, key: &str) -> Option<String> {
    query_params(uri).remove(key)
}

/// `metadata.name`, `metadata.namespace` and `status.phase`, with `=`, `==` or `!=`.
fn field_selector_matches(selector: Option<&str>, namespace: &str, object: &Value) -> bool {
    let Some(selector) = selector else { return true };
    selector.split(',').filter(|s| !s.is_empty()).all(|term| {
        let (field, want, equal) = match term.split_once("!=") {
            Some((f, v)) => (f, v, false),
            None => match term.split_once('=') {
                Some((f, v)) => (f, v.trim_start_matches('='), true),
                None => return false,
            },
        };
        let actual = match field {
            "metadata.name" => object["metadata"]["name"].as_str().unwrap_or_default(),
            "metadata.namespace" => namespace,
            "status.phase" => object["status"]["phase"].as_str().unwrap_or_default(),
            _ => return false,
        };
        (actual == want) == equal
    })
}

/// Terms of a selector, split at commas outside parentheses (`a in (x,y),b`).
fn selector_terms(selector: &str) -> Vec<&str> {
    let (mut terms, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms.into_iter().map(str::trim).filter(|t| !t.is_empty()).collect()
}

/// A `labelSelector`: `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`.
fn label_selector_matches(selector: Option<&str>, object: &Value) -> bool {
    let Some(selector) = selector else { return true };
    let labels = &object["metadata"]["labels"];
    let label = |k: &str| labels[k.trim()].as_str();
    selector_terms(selector).into_iter().all(|term| {
        let set = |rest: &str| -> Vec<String> {
            rest.trim()
                .trim_start_matches('(')
                .trim_end_matches(')')
                .split(',')
                .map(|v| v.trim().to_owned())
                .collect()
        };
        if let Some((k, rest)) = term.split_once(" notin ") {
            label(k).is_none_or(|v| !set(rest).iter().any(|x| x == v))
        } else if let Some((k, rest)) = term.split_once(" in ") {
            label(k).is_some_and(|v| set(rest).iter().any(|x| x == v))
        } else if let Some((k, v)) = term.split_once("!=") {
            label(k) != Some(v.trim())
        } else if let Some((k, v)) = term.split_once('=') {
            label(k) == Some(v.trim_start_matches('=').trim())
        } else if let Some(k) = term.strip_prefix('!') {
            label(k).is_none()
        } else {
            label(term).is_some()
        }
    })
}

/// The object as the API returns it at `version`.
fn at_version(mut object: Value, resource: &Resource, version: &str) -> Value {
    object["apiVersion"] = json!(api_version(resource.group, version));
    object["kind"] = json!(resource.kind);
    object
}

async fn handle(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path: Vec<&str> = uri.path().trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match path.as_slice() {
        ["api"] => {
            return ok_json(
                json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
            );
        }
        ["apis"] => return ok_json(group_list(&inner)),
        ["api", "v1"] => return ok_json(resource_list(&inner, "", "v1")),
        ["apis", g, v] => {
            if inner.resources.iter().any(|r| r.group == *g && r.versions.contains(v)) {
                return ok_json(resource_list(&inner, g, v));
            }
            return status(404, "NotFound", "the server could not find the requested resource");
        }
        ["api", "v1", rest @ ..] => ("", "v1", rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return status(404, "NotFound", "the server could not find the requested resource"),
    };
    let (namespace, plural, name) = match rest {
        ["namespaces", ns, plural] => (Some(*ns), *plural, None),
        ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name)),
        [plural] => (None, *plural, None),
        [plural, name] => (None, *plural, Some(*name)),
        _ => return status(404, "NotFound", "the server could not find the requested resource"),
    };
    let Some(resource) = inner.resource(group, version, plural).cloned() else {
        return status(404, "NotFound", "the server could not find the requested resource");
    };
    let watch = query_param(&uri, "watch").is_some_and(|w| w == "true" || w == "1");
    let verb = match (&method, name, watch) {
        (&Method::GET, Some(_), _) => "get",
        (&Method::GET, None, true) => "watch",
        (&Method::GET, None, false) => "list",
        (&Method::POST, None, _) => "create",
        (&Method::PUT, Some(_), _) => "update",
        (&Method::PATCH, Some(_), _) => "patch",
        _ => {
            return status(
                405,
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            );
        }
    };
    {
        let mut store = inner.lock();
        *store.requests.entry((verb.to_owned(), plural.to_owned())).or_default() += 1;
        store.params.entry((verb.to_owned(), plural.to_owned())).or_default().push(query_params(&uri));
        if store.forbidden.contains(&(verb.to_owned(), plural.to_owned())) {
            let scope = namespace
                .map_or_else(|| "at the cluster scope".to_owned(), |ns| format!("in the namespace \"{ns}\""));
            let message = format!(
                "{plural} is forbidden: User \"system:serviceaccount:kruise-system:kruise-admission\" cannot {verb} resource \"{plural}\" in API group \"{group}\" {scope}"
            );
            return status(403, "Forbidden", &message);
        }
    }
    let namespace = namespace.unwrap_or_default();
    let delay = inner.lock().delay;
    let counted = matches!(verb, "get" | "list");
    if counted {
        let mut store = inner.lock();
        store.in_flight += 1;
        store.max_in_flight = store.max_in_flight.max(store.in_flight);
    }
    // Even a fast answer takes a moment, so requests sent together overlap here.
    tokio::time::sleep(if counted { delay.max(Duration::from_millis(5)) } else { Duration::ZERO }).await;
    let response = answer(&inner, &resource, version, namespace, name, verb, &uri, &headers, &body);
    if counted {
        inner.lock().in_flight -= 1;
    }
    response
}

#[allow(clippy::too_many_arguments)]
fn answer(
    inner: &Arc<Inner>,
    resource: &Resource,
    version: &str,
    namespace: &str,
    name: Option<&str>,
    verb: &str,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Bytes,
) -> Response {
    let plural = resource.plural;
    match verb {
        "list" => list(inner, resource, version, namespace, &query_params(uri)),
        "watch" => watch_stream(inner, resource, version, namespace, uri),
        "get" => {
            let store = inner.lock();
            match store
                .objects
                .get(&(resource.group, resource.plural))
                .and_then(|m| m.get(&(namespace.to_owned(), name.unwrap_or_default().to_owned())))
            {
                Some(o) => ok_json(at_version(o.clone(), resource, version)),
                None => {
                    status(404, "NotFound", &format!("{plural} \"{}\" not found", name.unwrap_or_default()))
                }
            }
        }
        _ => write_request(inner, resource, version, namespace, name, verb, headers, body),
    }
}

fn group_list(inner: &Inner) -> Value {
    let mut groups: Vec<Value> = Vec::new();
    let mut seen = Vec::new();
    for r in inner.resources.iter().filter(|r| !r.group.is_empty()) {
        if seen.contains(&r.group) {
            continue;
        }
        seen.push(r.group);
        let versions: Vec<Value> = r
            .versions
            .iter()
            .map(|v| json!({"groupVersion": api_version(r.group, v), "version": v}))
            .collect();
        groups.push(json!({"name": r.group, "versions": versions, "preferredVersion": versions[0]}));
    }
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn resource_list(inner: &Inner, group: &str, version: &str) -> Value {
    let resources: Vec<Value> = inner
        .resources
        .iter()
        .filter(|r| r.group == group && r.versions.contains(&version))
        .map(|r| {
            json!({"name": r.plural, "singularName": r.kind.to_lowercase(), "namespaced": r.namespaced, "kind": r.kind,
                   "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"]})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": api_version(group, version), "resources": resources})
}

/// A list with `fieldSelector`, `labelSelector`, `limit` and `continue` (the token is the offset
/// of the next item; `remainingItemCount` is left out, as the real API does with selectors).
fn list(
    inner: &Inner,
    resource: &Resource,
    version: &str,
    namespace: &str,
    params: &BTreeMap<String, String>,
) -> Response {
    let store = inner.lock();
    let (fields, labels) =
        (params.get("fieldSelector").map(String::as_str), params.get("labelSelector").map(String::as_str));
    let limit: usize =
        params.get("limit").and_then(|l| l.parse().ok()).filter(|l| *l > 0).unwrap_or(usize::MAX);
    let offset: usize = params.get("continue").and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut matching = store
        .objects
        .get(&(resource.group, resource.plural))
        .into_iter()
        .flat_map(|m| m.iter())
        .filter(|((ns, _), o)| {
            (namespace.is_empty() || ns == namespace)
                && field_selector_matches(fields, ns, o)
                && label_selector_matches(labels, o)
        })
        .skip(offset)
        .peekable();
    let page: Vec<_> = matching.by_ref().take(limit).collect();
    let next = matching.peek().is_some().then(|| (offset + page.len()).to_string());
    let items: Vec<Value> = page
        .into_iter()
        .map(|(_, o)| {
            let mut o = o.clone();
            if resource.custom {
                o = at_version(o, resource, version);
            } else if let Some(map) = o.as_object_mut() {
                // Like the real API: items of built-in types carry no apiVersion/kind in a list.
                map.remove("apiVersion");
                map.remove("kind");
            }
            o
        })
        .collect();
    ok_json(json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": api_version(resource.group, version),
        "metadata": {"resourceVersion": store.rv.to_string(), "continue": next.unwrap_or_default()},
        "items": items,
    }))
}

fn watch_stream(
    inner: &Arc<Inner>,
    resource: &Resource,
    version: &str,
    namespace: &str,
    uri: &Uri,
) -> Response {
    let from: u64 = query_param(uri, "resourceVersion").and_then(|v| v.parse().ok()).unwrap_or(0);
    let bookmarks = query_param(uri, "allowWatchBookmarks").is_some_and(|v| v == "true");
    let timeout =
        query_param(uri, "timeoutSeconds").and_then(|v| v.parse::<u64>().ok()).map(Duration::from_secs);
    let field_selector = query_param(uri, "fieldSelector");
    let resource = resource.clone();
    let version = version.to_owned();
    let namespace = namespace.to_owned();
    let matches = {
        let resource = resource.clone();
        let namespace = namespace.clone();
        move |e: &WatchEvent| {
            e.group == resource.group
                && e.plural == resource.plural
                && (namespace.is_empty() || e.namespace == namespace)
                && field_selector_matches(field_selector.as_deref(), &e.namespace, &e.object["object"])
        }
    };
    let (backlog, mut live, current, gone) = {
        let store = inner.lock();
        let gone = from != 0 && from < store.compacted;
        let backlog: Vec<WatchEvent> =
            store.history.iter().filter(|e| e.rv > from && matches(e)).cloned().collect();
        (backlog, inner.events.subscribe(), store.rv, gone)
    };
    let mut drops = inner.drops.subscribe();
    let bookmark_every = inner.bookmark_every;
    let inner = Arc::clone(inner);
    let line = move |event: &Value| Bytes::from(format!("{event}\n"));
    let stream = async_stream(move |tx| async move {
        if gone {
            let error = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("too old resource version: {from} ({current})"), "reason": "Expired", "code": 410}});
            let _ = tx.send(Ok(line(&error))).await;
            return;
        }
        for e in backlog {
            let mut event = e.object.clone();
            event["object"] = at_version(event["object"].take(), &resource, &version);
            if tx.send(Ok(line(&event))).await.is_err() {
                return;
            }
        }
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut ticker = tokio::time::interval(bookmark_every);
        loop {
            let until_deadline = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = until_deadline => return,
                _ = drops.recv() => {
                    let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "dropped by test"))).await;
                    return;
                }
                _ = ticker.tick(), if bookmarks => {
                    let rv = inner.lock().rv;
                    let bookmark = json!({"type": "BOOKMARK", "object": {"kind": resource.kind, "apiVersion": api_version(resource.group, &version),
                        "metadata": {"resourceVersion": rv.to_string()}}});
                    if tx.send(Ok(line(&bookmark))).await.is_err() { return; }
                }
                event = live.recv() => {
                    let Ok(e) = event else { return };
                    if !matches(&e) { continue; }
                    let mut event = e.object.clone();
                    event["object"] = at_version(event["object"].take(), &resource, &version);
                    if tx.send(Ok(line(&event))).await.is_err() { return; }
                }
            }
        }
    });
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(Body::from_stream(stream))
        .unwrap()
}

type Chunk = Result<Bytes, std::io::Error>;

/// A body stream fed by a task; an `Err` item makes hyper abort the connection mid-body.
fn async_stream<F, Fut>(producer: F) -> impl futures_util::Stream<Item = Chunk> + Send + 'static
where
    F: FnOnce(tokio::sync::mpsc::Sender<Chunk>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(producer(tx));
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

#[allow(clippy::too_many_arguments)]
fn write_request(
    inner: &Inner,
    resource: &Resource,
    version: &str,
    namespace: &str,
    name: Option<&str>,
    verb: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let Ok(body) = serde_json::from_slice::<Value>(body) else {
        return status(400, "BadRequest", "the request body is not JSON");
    };
    let mut store = inner.lock();
    let key_name = name.map(str::to_owned).unwrap_or_else(|| name_of(&body));
    let existing = store
        .objects
        .get(&(resource.group, resource.plural))
        .and_then(|m| m.get(&(namespace.to_owned(), key_name.clone())))
        .cloned();
    let conflict = || {
        status(
            409,
            "Conflict",
            &format!(
                "Operation cannot be fulfilled on {}.{} \"{key_name}\": the object has been modified; please apply your changes to the latest version and try again",
                resource.plural, resource.group
            ),
        )
    };
    let not_found = || status(404, "NotFound", &format!("{} \"{key_name}\" not found", resource.plural));
    let object = match verb {
        "create" => {
            if existing.is_some() {
                return status(
                    409,
                    "AlreadyExists",
                    &format!("{} \"{key_name}\" already exists", resource.plural),
                );
            }
            write(inner, &mut store, resource, namespace, body, "ADDED")
        }
        "update" => {
            let Some(old) = existing else { return not_found() };
            let wanted = body["metadata"]["resourceVersion"].as_str();
            if wanted.is_some_and(|rv| Some(rv) != old["metadata"]["resourceVersion"].as_str()) {
                return conflict();
            }
            write(inner, &mut store, resource, namespace, body, "MODIFIED")
        }
        _ => {
            let Some(old) = existing else { return not_found() };
            let content_type = headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
            let patched = if content_type.starts_with("application/json-patch+json") {
                let Ok(patch) = serde_json::from_value::<json_patch::Patch>(body) else {
                    return status(400, "BadRequest", "invalid JSON patch");
                };
                let mut doc = old.clone();
                if json_patch::patch(&mut doc, &patch).is_err() {
                    return status(422, "Invalid", "the JSON patch could not be applied");
                }
                doc
            } else {
                let mut doc = old.clone();
                json_patch::merge(&mut doc, &body);
                doc
            };
            if patched["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"] {
                return conflict();
            }
            write(inner, &mut store, resource, namespace, patched, "MODIFIED")
        }
    };
    let code = if verb == "create" { StatusCode::CREATED } else { StatusCode::OK };
    (code, [("content-type", "application/json")], at_version(object, resource, version).to_string())
        .into_response()
}
