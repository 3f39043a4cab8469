//! The part of Kubernetes pod validation (`ValidatePodCreate`) that applies to a SidecarSet's
//! containers, init containers and volumes. Kruise validates them by building a fake pod; the
//! paths in messages are therefore the fake pod's: `spec.containers[0].image`,
//! `spec.initContainers[1].name`, `spec.volumes[0]`.
//!
//! Covered: names (DNS-1123 labels, unique across containers and init containers, volumes unique),
//! image required and trimmed, pull and termination-message policies, ports (range, protocol,
//! names, duplicates), env names and sources, envFrom, volume mounts (volume exists, path required
//! and unique, subPath relative), volume devices, resource quantities and requests ≤ limits,
//! probes and lifecycle (handler count, thresholds, init-container rules), restartPolicy, and
//! volumes (exactly one source, required source fields, modes).

use std::collections::{BTreeMap, HashSet};
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::api::field_errors::{self, FieldError};
use crate::api::names::{anchored, qualified_name_errors};
use crate::api::quantity;

const DNS1123_LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const ENV_VAR_NAME: &str = "[-._a-zA-Z][-._a-zA-Z0-9]*";

static DNS1123_LABEL_RE: LazyLock<Regex> = LazyLock::new(|| anchored(DNS1123_LABEL));
static ENV_VAR_NAME_RE: LazyLock<Regex> = LazyLock::new(|| anchored(ENV_VAR_NAME));
static PORT_NAME_CHARS: LazyLock<Regex> = LazyLock::new(|| anchored("[-a-z0-9]+"));
static PORT_NAME_LETTER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new("[a-z]").unwrap_or_else(|e| unreachable!("{e}")));

/// `validation.IsDNS1123Label`.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push(field_errors::max_len_error(63));
    }
    if !DNS1123_LABEL_RE.is_match(value) {
        errs.push(field_errors::regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            DNS1123_LABEL,
            &["my-name", "123-abc"],
        ));
    }
    errs
}

fn env_var_name_errors(value: &str) -> Vec<String> {
    if ENV_VAR_NAME_RE.is_match(value) {
        return Vec::new();
    }
    vec![field_errors::regex_error(
        "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit",
        ENV_VAR_NAME,
        &["my.env-name", "MY_ENV.NAME", "MyEnvName1"],
    )]
}

/// `validation.IsValidPortName`.
fn port_name_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 15 {
        errs.push(field_errors::max_len_error(15));
    }
    if !PORT_NAME_CHARS.is_match(name) {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !PORT_NAME_LETTER.is_match(name) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if name.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if name.starts_with('-') || name.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

fn str_of<'a>(m: &'a Map<String, Value>, key: &str) -> &'a str {
    m.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn objects<'a>(
    m: &'a Map<String, Value>,
    key: &str,
) -> impl Iterator<Item = (usize, &'a Map<String, Value>)> {
    m.get(key)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, v)| v.as_object().map(|o| (i, o)))
}

fn set(m: &Map<String, Value>, key: &str) -> bool {
    m.get(key).is_some_and(|v| !v.is_null())
}

/// Fields of `corev1.VolumeSource` at k8s.io/api v0.32: validation requires exactly one, and
/// defaulting gives a volume with none of them `emptyDir: {}`.
pub const VOLUME_SOURCES: &[&str] = &[
    "hostPath",
    "emptyDir",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "gitRepo",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "persistentVolumeClaim",
    "rbd",
    "flexVolume",
    "cinder",
    "cephfs",
    "flocker",
    "downwardAPI",
    "fc",
    "azureFile",
    "configMap",
    "vsphereVolume",
    "quobyte",
    "azureDisk",
    "photonPersistentDisk",
    "projected",
    "portworxVolume",
    "scaleIO",
    "storageos",
    "csi",
    "ephemeral",
    "image",
];

/// Validate `spec.volumes`; returns the volume names (for mount checks) and the errors.
pub fn validate_volumes(volumes: &[Value]) -> (HashSet<String>, Vec<FieldError>) {
    let mut names = HashSet::new();
    let mut errs = Vec::new();
    for (i, v) in volumes.iter().enumerate() {
        let p = format!("spec.volumes[{i}]");
        let Some(v) = v.as_object() else {
            errs.push(field_errors::invalid(p, v, "must be an object"));
            continue;
        };
        let name = str_of(v, "name");
        if name.is_empty() {
            errs.push(field_errors::required(format!("{p}.name"), ""));
        } else {
            errs.extend(
                dns1123_label_errors(name)
                    .into_iter()
                    .map(|m| field_errors::invalid_str(format!("{p}.name"), name, m)),
            );
        }
        if !name.is_empty() && !names.insert(name.to_owned()) {
            errs.push(field_errors::duplicate(format!("{p}.name"), name));
        }
        let sources: Vec<&str> = VOLUME_SOURCES.iter().copied().filter(|s| set(v, s)).collect();
        match sources.as_slice() {
            [] => errs.push(field_errors::required(p.clone(), "must specify a volume type")),
            [one] => validate_volume_source(v, one, &format!("{p}.{one}"), &mut errs),
            [_, rest @ ..] => {
                for extra in rest {
                    errs.push(field_errors::forbidden(
                        format!("{p}.{extra}"),
                        "may not specify more than 1 volume type",
                    ));
                }
            }
        }
    }
    (names, errs)
}

fn validate_mode(source: &Map<String, Value>, key: &str, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(mode) = source.get(key).filter(|m| !m.is_null())
        && !mode.as_i64().is_some_and(|m| (0..=0o777).contains(&m))
    {
        errs.push(field_errors::invalid(
            format!("{path}.{key}"),
            mode,
            "must be a number between 0 and 0777 (octal), both inclusive",
        ));
    }
}

fn validate_volume_source(volume: &Map<String, Value>, kind: &str, path: &str, errs: &mut Vec<FieldError>) {
    let Some(source) = volume.get(kind).and_then(Value::as_object) else {
        errs.push(field_errors::invalid(path, &volume[kind], "must be an object"));
        return;
    };
    let require = |key: &str, errs: &mut Vec<FieldError>| {
        if str_of(source, key).is_empty() {
            errs.push(field_errors::required(format!("{path}.{key}"), ""));
        }
    };
    match kind {
        "hostPath" => {
            require("path", errs);
            let t = str_of(source, "type");
            const TYPES: &[&str] = &[
                "",
                "DirectoryOrCreate",
                "Directory",
                "FileOrCreate",
                "File",
                "Socket",
                "CharDevice",
                "BlockDevice",
            ];
            if !TYPES.contains(&t) {
                errs.push(field_errors::not_supported(format!("{path}.type"), t, TYPES));
            }
        }
        "secret" => {
            require("secretName", errs);
            validate_mode(source, "defaultMode", path, errs);
        }
        "configMap" => {
            require("name", errs);
            validate_mode(source, "defaultMode", path, errs);
        }
        "persistentVolumeClaim" => require("claimName", errs),
        "nfs" => {
            require("server", errs);
            require("path", errs);
        }
        "downwardAPI" | "projected" => validate_mode(source, "defaultMode", path, errs),
        "emptyDir" => {
            if let Some(limit) = source.get("sizeLimit").filter(|v| !v.is_null())
                && quantity::go_text(limit, false).is_none()
            {
                errs.push(field_errors::invalid(format!("{path}.sizeLimit"), limit, "must be a quantity"));
            }
        }
        _ => {}
    }
}

/// Which list a container comes from; init containers have extra rules.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ContainerList {
    Init,
    Regular,
}

/// Validate the fake pod's init containers and containers (in that order, like Kubernetes).
pub fn validate_containers(init: &[Value], regular: &[Value], volumes: &HashSet<String>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let regular_names: HashSet<&str> =
        regular.iter().filter_map(|c| c.get("name").and_then(Value::as_str)).collect();
    let mut init_names = HashSet::new();
    for (i, c) in init.iter().enumerate() {
        let p = format!("spec.initContainers[{i}]");
        let Some(c) = c.as_object() else {
            errs.push(field_errors::invalid(p, c, "must be an object"));
            continue;
        };
        let name = str_of(c, "name");
        // An init container may not share a name with a regular container or another init container.
        if !name.is_empty() && (regular_names.contains(name) || !init_names.insert(name)) {
            errs.push(field_errors::duplicate(format!("{p}.name"), name));
        }
        validate_container(c, &p, ContainerList::Init, volumes, &mut errs);
    }
    let mut seen = HashSet::new();
    for (i, c) in regular.iter().enumerate() {
        let p = format!("spec.containers[{i}]");
        let Some(c) = c.as_object() else {
            errs.push(field_errors::invalid(p, c, "must be an object"));
            continue;
        };
        let name = str_of(c, "name");
        if !name.is_empty() && !seen.insert(name) {
            errs.push(field_errors::duplicate(format!("{p}.name"), name));
        }
        validate_container(c, &p, ContainerList::Regular, volumes, &mut errs);
    }
    errs
}

fn validate_container(
    c: &Map<String, Value>,
    p: &str,
    list: ContainerList,
    volumes: &HashSet<String>,
    errs: &mut Vec<FieldError>,
) {
    validate_name_and_image(c, p, errs);
    let native_sidecar = str_of(c, "restartPolicy") == "Always";
    validate_restart_policy(c, p, list, native_sidecar, errs);
    required_one_of(c, p, "imagePullPolicy", &["Always", "IfNotPresent", "Never"], errs);
    required_one_of(c, p, "terminationMessagePolicy", &["File", "FallbackToLogsOnError"], errs);
    validate_ports(c, p, errs);
    validate_env(c, p, errs);
    validate_env_from(c, p, errs);
    validate_mounts(c, p, volumes, errs);
    validate_resources(c, p, errs);
    let plain_init = list == ContainerList::Init && !native_sidecar;
    validate_probes(c, p, plain_init, errs);
    validate_lifecycle(c, p, plain_init, errs);
}

fn validate_name_and_image(c: &Map<String, Value>, p: &str, errs: &mut Vec<FieldError>) {
    let name = str_of(c, "name");
    if name.is_empty() {
        errs.push(field_errors::required(format!("{p}.name"), ""));
    } else {
        errs.extend(
            dns1123_label_errors(name)
                .into_iter()
                .map(|m| field_errors::invalid_str(format!("{p}.name"), name, m)),
        );
    }
    let image = str_of(c, "image");
    if image.is_empty() {
        errs.push(field_errors::required(format!("{p}.image"), ""));
    } else if image.trim() != image {
        errs.push(field_errors::invalid_str(
            format!("{p}.image"),
            image,
            "must not have leading or trailing whitespace",
        ));
    }
}

/// `restartPolicy` only on init containers, and only `Always` (a native sidecar).
fn validate_restart_policy(
    c: &Map<String, Value>,
    p: &str,
    list: ContainerList,
    native_sidecar: bool,
    errs: &mut Vec<FieldError>,
) {
    match (list, c.get("restartPolicy").filter(|v| !v.is_null())) {
        (ContainerList::Regular, Some(_)) => errs.push(field_errors::forbidden(
            format!("{p}.restartPolicy"),
            "may not be set for non-init containers",
        )),
        (ContainerList::Init, Some(v)) if !native_sidecar => {
            errs.push(field_errors::not_supported(
                format!("{p}.restartPolicy"),
                v.as_str().unwrap_or_default(),
                &["Always"],
            ));
        }
        _ => {}
    }
}

/// A string field that must be set (defaulting set it) to one of `allowed`.
fn required_one_of(c: &Map<String, Value>, p: &str, key: &str, allowed: &[&str], errs: &mut Vec<FieldError>) {
    match str_of(c, key) {
        "" => errs.push(field_errors::required(format!("{p}.{key}"), "")),
        value if allowed.contains(&value) => {}
        other => errs.push(field_errors::not_supported(format!("{p}.{key}"), other, allowed)),
    }
}

fn validate_probes(c: &Map<String, Value>, p: &str, plain_init: bool, errs: &mut Vec<FieldError>) {
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        let Some(v) = c.get(probe).filter(|v| !v.is_null()) else { continue };
        let pp = format!("{p}.{probe}");
        if plain_init {
            errs.push(field_errors::forbidden(
                pp,
                "may not be set for init containers without restartPolicy=Always",
            ));
            continue;
        }
        validate_probe(v, &pp, probe, errs);
    }
}

fn validate_lifecycle(c: &Map<String, Value>, p: &str, plain_init: bool, errs: &mut Vec<FieldError>) {
    let Some(lifecycle) = c.get("lifecycle").filter(|v| !v.is_null()) else { return };
    let lp = format!("{p}.lifecycle");
    if plain_init {
        errs.push(field_errors::forbidden(
            lp,
            "may not be set for init containers without restartPolicy=Always",
        ));
    } else if let Some(l) = lifecycle.as_object() {
        for hook in ["postStart", "preStop"] {
            if let Some(h) = l.get(hook).and_then(Value::as_object) {
                validate_handler(
                    h,
                    &format!("{lp}.{hook}"),
                    &["exec", "httpGet", "tcpSocket", "sleep"],
                    errs,
                );
            }
        }
    }
}

fn validate_ports(c: &Map<String, Value>, p: &str, errs: &mut Vec<FieldError>) {
    let mut names = HashSet::new();
    for (i, port) in objects(c, "ports") {
        let pp = format!("{p}.ports[{i}]");
        let name = str_of(port, "name");
        if !name.is_empty() {
            errs.extend(
                port_name_errors(name)
                    .into_iter()
                    .map(|m| field_errors::invalid_str(format!("{pp}.name"), name, m)),
            );
            if !names.insert(name) {
                errs.push(field_errors::duplicate(format!("{pp}.name"), name));
            }
        }
        let container_port = port.get("containerPort").cloned().unwrap_or(Value::from(0));
        if !container_port.as_i64().is_some_and(|n| (1..=65535).contains(&n)) {
            errs.push(field_errors::invalid(
                format!("{pp}.containerPort"),
                &container_port,
                "must be between 1 and 65535, inclusive",
            ));
        }
        if let Some(host_port) = port.get("hostPort").filter(|v| v.as_i64() != Some(0) && !v.is_null())
            && !host_port.as_i64().is_some_and(|n| (1..=65535).contains(&n))
        {
            errs.push(field_errors::invalid(
                format!("{pp}.hostPort"),
                host_port,
                "must be between 1 and 65535, inclusive",
            ));
        }
        match str_of(port, "protocol") {
            "" => errs.push(field_errors::required(format!("{pp}.protocol"), "")),
            "TCP" | "UDP" | "SCTP" => {}
            other => errs.push(field_errors::not_supported(
                format!("{pp}.protocol"),
                other,
                &["SCTP", "TCP", "UDP"],
            )),
        }
    }
}

const POD_FIELD_PATHS: &[&str] = &[
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

/// `fieldpath.SplitMaybeSubscriptedPath`: `metadata.labels['k']` → (`metadata.labels`, `k`).
pub fn split_subscripted(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_suffix("']")?;
    let (base, key) = rest.split_once("['")?;
    Some((base, key))
}

fn validate_env(c: &Map<String, Value>, p: &str, errs: &mut Vec<FieldError>) {
    for (i, env) in objects(c, "env") {
        let ep = format!("{p}.env[{i}]");
        let name = str_of(env, "name");
        if name.is_empty() {
            errs.push(field_errors::required(format!("{ep}.name"), ""));
        } else {
            errs.extend(
                env_var_name_errors(name)
                    .into_iter()
                    .map(|m| field_errors::invalid_str(format!("{ep}.name"), name, m)),
            );
        }
        let Some(from) = env.get("valueFrom").and_then(Value::as_object) else { continue };
        let fp = format!("{ep}.valueFrom");
        let sources: Vec<&str> = ["fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef"]
            .into_iter()
            .filter(|s| set(from, s))
            .collect();
        if !str_of(env, "value").is_empty() && !sources.is_empty() {
            errs.push(field_errors::invalid_str(&fp, "", "may not be specified when `value` is not empty"));
        }
        match sources.len() {
            0 => errs.push(field_errors::invalid_str(
                &fp,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            )),
            1 => {}
            _ => errs.push(field_errors::invalid_str(
                &fp,
                "",
                "may not have more than one field specified at a time",
            )),
        }
        if let Some(fr) = from.get("fieldRef").and_then(Value::as_object) {
            let frp = format!("{fp}.fieldRef");
            let path = str_of(fr, "fieldPath");
            if str_of(fr, "apiVersion").is_empty() {
                errs.push(field_errors::required(format!("{frp}.apiVersion"), ""));
            } else if path.is_empty() {
                errs.push(field_errors::required(format!("{frp}.fieldPath"), ""));
            } else if let Some((base, key)) = split_subscripted(path) {
                match base {
                    "metadata.annotations" => errs.extend(
                        qualified_name_errors(&key.to_lowercase())
                            .into_iter()
                            .map(|m| field_errors::invalid_str(&frp, key, m)),
                    ),
                    "metadata.labels" => errs.extend(
                        qualified_name_errors(key)
                            .into_iter()
                            .map(|m| field_errors::invalid_str(&frp, key, m)),
                    ),
                    _ => errs.push(field_errors::invalid_str(&frp, base, "does not support subscript")),
                }
            } else if !POD_FIELD_PATHS.contains(&path) {
                errs.push(field_errors::not_supported(format!("{frp}.fieldPath"), path, POD_FIELD_PATHS));
            }
        }
        for key_ref in ["configMapKeyRef", "secretKeyRef"] {
            if let Some(r) = from.get(key_ref).and_then(Value::as_object) {
                if str_of(r, "name").is_empty() {
                    errs.push(field_errors::required(format!("{fp}.{key_ref}.name"), ""));
                }
                if str_of(r, "key").is_empty() {
                    errs.push(field_errors::required(format!("{fp}.{key_ref}.key"), ""));
                }
            }
        }
        if let Some(r) = from.get("resourceFieldRef").and_then(Value::as_object)
            && str_of(r, "resource").is_empty()
        {
            errs.push(field_errors::required(format!("{fp}.resourceFieldRef.resource"), ""));
        }
    }
}

fn validate_env_from(c: &Map<String, Value>, p: &str, errs: &mut Vec<FieldError>) {
    for (i, from) in objects(c, "envFrom") {
        let ep = format!("{p}.envFrom[{i}]");
        let prefix = str_of(from, "prefix");
        if !prefix.is_empty() {
            errs.extend(
                env_var_name_errors(prefix)
                    .into_iter()
                    .map(|m| field_errors::invalid_str(format!("{ep}.prefix"), prefix, m)),
            );
        }
        match (set(from, "configMapRef"), set(from, "secretRef")) {
            (false, false) => errs.push(field_errors::invalid_str(
                &ep,
                "",
                "must specify one of: `configMapRef` or `secretRef`",
            )),
            (true, true) => errs.push(field_errors::invalid_str(
                &ep,
                "",
                "may not have more than one field specified at a time",
            )),
            _ => {}
        }
    }
}

fn validate_mounts(c: &Map<String, Value>, p: &str, volumes: &HashSet<String>, errs: &mut Vec<FieldError>) {
    let mut paths = HashSet::new();
    for (i, m) in objects(c, "volumeMounts") {
        let mp = format!("{p}.volumeMounts[{i}]");
        validate_volume_name(m, &mp, volumes, errs);
        let path = str_of(m, "mountPath");
        if path.is_empty() {
            errs.push(field_errors::required(format!("{mp}.mountPath"), ""));
        } else if !paths.insert(path) {
            errs.push(field_errors::invalid_str(format!("{mp}.mountPath"), path, "must be unique"));
        }
        let sub_path = str_of(m, "subPath");
        if !sub_path.is_empty() {
            if sub_path.starts_with('/') {
                errs.push(field_errors::invalid_str(
                    format!("{mp}.subPath"),
                    sub_path,
                    "must be a relative path",
                ));
            }
            if sub_path.split('/').any(|part| part == "..") {
                errs.push(field_errors::invalid_str(
                    format!("{mp}.subPath"),
                    sub_path,
                    "must not contain '..'",
                ));
            }
            if !str_of(m, "subPathExpr").is_empty() {
                errs.push(field_errors::invalid_str(
                    format!("{mp}.subPathExpr"),
                    str_of(m, "subPathExpr"),
                    "subPathExpr and subPath are mutually exclusive",
                ));
            }
        }
    }
    for (i, d) in objects(c, "volumeDevices") {
        let dp = format!("{p}.volumeDevices[{i}]");
        validate_volume_name(d, &dp, volumes, errs);
        let path = str_of(d, "devicePath");
        if path.is_empty() {
            errs.push(field_errors::required(format!("{dp}.devicePath"), ""));
        } else if paths.contains(path) {
            errs.push(field_errors::invalid_str(
                format!("{dp}.devicePath"),
                path,
                "must not already exist as a path in volumeMounts",
            ));
        }
    }
}

/// A volume mount's or device's `name` names one of the pod's volumes.
fn validate_volume_name(
    item: &Map<String, Value>,
    p: &str,
    volumes: &HashSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let name = str_of(item, "name");
    if name.is_empty() {
        errs.push(field_errors::required(format!("{p}.name"), ""));
    } else if !volumes.contains(name) {
        errs.push(field_errors::not_found(format!("{p}.name"), name));
    }
}

/// Quantities parse, are not negative, and requests do not exceed limits.
fn validate_resources(c: &Map<String, Value>, p: &str, errs: &mut Vec<FieldError>) {
    let Some(res) = c.get("resources").and_then(Value::as_object) else { return };
    let mut parsed: BTreeMap<(&str, &str), f64> = BTreeMap::new();
    for list in ["limits", "requests"] {
        let Some(map) = res.get(list).and_then(Value::as_object) else { continue };
        for (name, q) in map {
            let rp = format!("{p}.resources.{list}[{name}]");
            let Some(value) =
                quantity::go_text(q, false).and_then(|t| quantity::parse(&t)).map(|q| q.as_f64())
            else {
                errs.push(field_errors::invalid(rp, q, "must be a quantity"));
                continue;
            };
            if value < 0.0 {
                errs.push(field_errors::invalid(rp, q, "must be greater than or equal to 0"));
            }
            parsed.insert((list, name.as_str()), value);
        }
    }
    for ((_, name), request) in parsed.iter().filter(|((l, _), _)| *l == "requests") {
        if let Some(limit) = parsed.get(&("limits", *name))
            && request > limit
        {
            let shown = res["requests"][*name].clone();
            let limit_text = quantity::go_text(&res["limits"][*name], false).unwrap_or_default();
            errs.push(field_errors::invalid(
                format!("{p}.resources.requests"),
                &shown,
                format!("must be less than or equal to {name} limit of {limit_text}"),
            ));
        }
    }
}

fn validate_handler(h: &Map<String, Value>, p: &str, kinds: &[&str], errs: &mut Vec<FieldError>) {
    let present: Vec<&str> = kinds.iter().copied().filter(|k| set(h, k)).collect();
    match present.as_slice() {
        [] => errs.push(field_errors::required(p, "must specify a handler type")),
        [_] => {}
        [_, rest @ ..] => {
            for k in rest {
                errs.push(field_errors::forbidden(
                    format!("{p}.{k}"),
                    "may not specify more than 1 handler type",
                ));
            }
        }
    }
    for kind in ["httpGet", "tcpSocket"] {
        if let Some(action) = h.get(kind).and_then(Value::as_object) {
            let port = action.get("port").cloned().unwrap_or(Value::from(0));
            let ok = match &port {
                Value::Number(n) => n.as_i64().is_some_and(|n| (1..=65535).contains(&n)),
                Value::String(s) => port_name_errors(s).is_empty(),
                _ => false,
            };
            if !ok {
                let detail = if port.is_string() {
                    "must contain at least one letter (a-z)"
                } else {
                    "must be between 1 and 65535, inclusive"
                };
                errs.push(field_errors::invalid(format!("{p}.{kind}.port"), &port, detail));
            }
        }
    }
    if let Some(get) = h.get("httpGet").and_then(Value::as_object) {
        match str_of(get, "scheme") {
            "" | "HTTP" | "HTTPS" => {}
            other => errs.push(field_errors::not_supported(
                format!("{p}.httpGet.scheme"),
                other,
                &["HTTP", "HTTPS"],
            )),
        }
    }
    if let Some(exec) = h.get("exec").and_then(Value::as_object)
        && exec.get("command").and_then(Value::as_array).is_none_or(Vec::is_empty)
    {
        errs.push(field_errors::required(format!("{p}.exec.command"), ""));
    }
}

fn validate_probe(probe: &Value, p: &str, kind: &str, errs: &mut Vec<FieldError>) {
    let Some(pr) = probe.as_object() else {
        errs.push(field_errors::invalid(p, probe, "must be an object"));
        return;
    };
    validate_handler(pr, p, &["exec", "httpGet", "tcpSocket", "grpc"], errs);
    for key in
        ["initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"]
    {
        if let Some(v) = pr.get(key).filter(|v| v.as_i64().is_some_and(|n| n < 0)) {
            errs.push(field_errors::invalid(format!("{p}.{key}"), v, "must be greater than or equal to 0"));
        }
    }
    if let Some(v) = pr.get("terminationGracePeriodSeconds").filter(|v| v.as_i64().is_some_and(|n| n <= 0)) {
        errs.push(field_errors::invalid(
            format!("{p}.terminationGracePeriodSeconds"),
            v,
            "must be greater than 0",
        ));
    }
    if matches!(kind, "livenessProbe" | "startupProbe")
        && let Some(v) = pr.get("successThreshold").filter(|v| v.as_i64().is_some_and(|n| n != 1 && n != 0))
    {
        errs.push(field_errors::invalid(format!("{p}.successThreshold"), v, "must be 1"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msgs(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    fn good() -> Value {
        json!({"name": "c", "image": "x:1", "imagePullPolicy": "IfNotPresent", "terminationMessagePolicy": "File"})
    }

    #[test]
    fn a_defaulted_container_is_valid() {
        assert!(validate_containers(&[], &[good()], &HashSet::new()).is_empty());
    }

    #[test]
    fn container_rules() {
        let vols: HashSet<String> = ["v".to_owned()].into();
        let mut bad = good();
        bad["name"] = json!("Bad_Name");
        bad["image"] = json!("");
        bad["ports"] = json!([{"containerPort": 0, "protocol": "HTTP"}]);
        bad["env"] = json!([{"name": "1A"}]);
        bad["volumeMounts"] = json!([{"name": "missing", "mountPath": "/a"}, {"name": "v", "mountPath": "/a", "subPath": "../x"}]);
        bad["resources"] = json!({"limits": {"cpu": "1"}, "requests": {"cpu": "2"}});
        bad["livenessProbe"] = json!({"successThreshold": 2, "periodSeconds": 1});
        let m = msgs(&validate_containers(&[], &[bad], &vols));
        let expect = [
            r#"spec.containers[0].name: Invalid value: "Bad_Name": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"#,
            "spec.containers[0].image: Required value",
            "spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535, inclusive",
            r#"spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", "TCP", "UDP""#,
            r#"spec.containers[0].env[0].name: Invalid value: "1A": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')"#,
            r#"spec.containers[0].volumeMounts[0].name: Not found: "missing""#,
            r#"spec.containers[0].volumeMounts[1].mountPath: Invalid value: "/a": must be unique"#,
            r#"spec.containers[0].volumeMounts[1].subPath: Invalid value: "../x": must not contain '..'"#,
            r#"spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu limit of 1"#,
            "spec.containers[0].livenessProbe: Required value: must specify a handler type",
            "spec.containers[0].livenessProbe.successThreshold: Invalid value: 2: must be 1",
        ];
        assert_eq!(m, expect);
    }

    #[test]
    fn more_container_rules() {
        let vols: HashSet<String> = ["v".to_owned()].into();
        let mut bad = good();
        bad["imagePullPolicy"] = json!("Sometimes");
        bad["terminationMessagePolicy"] = json!("Log");
        bad["ports"] =
            json!([{"containerPort": 80, "hostPort": 70000, "protocol": "TCP", "name": "Web--port"}]);
        bad["env"] = json!([{"name": "A", "value": "x", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.phase"}}}]);
        bad["envFrom"] = json!([{"prefix": "P_"}]);
        bad["volumeMounts"] = json!([{"name": "v", "mountPath": "/a", "subPath": "/abs"}]);
        bad["volumeDevices"] = json!([{"name": "w", "devicePath": "/dev/x"}]);
        bad["readinessProbe"] =
            json!({"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}, "periodSeconds": -1});
        bad["lifecycle"] = json!({"preStop": {"httpGet": {"port": 0}}});
        let m = msgs(&validate_containers(&[], &[bad], &vols));
        let expect = [
            r#"spec.containers[0].imagePullPolicy: Unsupported value: "Sometimes": supported values: "Always", "IfNotPresent", "Never""#,
            r#"spec.containers[0].terminationMessagePolicy: Unsupported value: "Log": supported values: "File", "FallbackToLogsOnError""#,
            r#"spec.containers[0].ports[0].name: Invalid value: "Web--port": must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"#,
            r#"spec.containers[0].ports[0].name: Invalid value: "Web--port": must not contain consecutive hyphens"#,
            "spec.containers[0].ports[0].hostPort: Invalid value: 70000: must be between 1 and 65535, inclusive",
            r#"spec.containers[0].env[0].valueFrom: Invalid value: "": may not be specified when `value` is not empty"#,
            r#"spec.containers[0].env[0].valueFrom.fieldRef.fieldPath: Unsupported value: "status.phase": supported values: "metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs""#,
            r#"spec.containers[0].envFrom[0]: Invalid value: "": must specify one of: `configMapRef` or `secretRef`"#,
            r#"spec.containers[0].volumeMounts[0].subPath: Invalid value: "/abs": must be a relative path"#,
            r#"spec.containers[0].volumeDevices[0].name: Not found: "w""#,
            "spec.containers[0].readinessProbe.tcpSocket: Forbidden: may not specify more than 1 handler type",
            "spec.containers[0].readinessProbe.periodSeconds: Invalid value: -1: must be greater than or equal to 0",
            "spec.containers[0].lifecycle.preStop.httpGet.port: Invalid value: 0: must be between 1 and 65535, inclusive",
        ];
        assert_eq!(m, expect);
    }

    #[test]
    fn init_container_rules() {
        let mut plain = good();
        plain["livenessProbe"] = json!({"exec": {"command": ["true"]}});
        plain["restartPolicy"] = json!("OnFailure");
        let m = msgs(&validate_containers(&[plain, good()], &[good()], &HashSet::new()));
        assert_eq!(
            m,
            [
                r#"spec.initContainers[0].name: Duplicate value: "c""#,
                r#"spec.initContainers[0].restartPolicy: Unsupported value: "OnFailure": supported values: "Always""#,
                "spec.initContainers[0].livenessProbe: Forbidden: may not be set for init containers without restartPolicy=Always",
                r#"spec.initContainers[1].name: Duplicate value: "c""#,
            ]
        );
        let mut regular = good();
        regular["restartPolicy"] = json!("Always");
        let m = msgs(&validate_containers(&[], &[regular], &HashSet::new()));
        assert_eq!(
            m,
            ["spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers"]
        );
    }

    #[test]
    fn volume_rules() {
        let (names, errs) = validate_volumes(&[
            json!({"name": "a", "emptyDir": {}}),
            json!({"name": "a", "emptyDir": {}, "hostPath": {"path": "/x"}}),
            json!({"name": "b"}),
            json!({"name": "c", "secret": {"defaultMode": 1000}}),
        ]);
        assert!(names.contains("a") && names.contains("b"));
        assert_eq!(
            msgs(&errs),
            [
                r#"spec.volumes[1].name: Duplicate value: "a""#,
                // Kubernetes checks hostPath before emptyDir, so the second one found is reported.
                "spec.volumes[1].emptyDir: Forbidden: may not specify more than 1 volume type",
                "spec.volumes[2]: Required value: must specify a volume type",
                "spec.volumes[3].secret.secretName: Required value",
                "spec.volumes[3].secret.defaultMode: Invalid value: 1000: must be a number between 0 and 0777 (octal), both inclusive",
            ]
        );
    }
}
