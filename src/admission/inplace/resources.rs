//! In-place vertical scaling (docs/workloads.md#2-5-vertical-scaling, behind
//! `Settings::inplace_vertical_scaling`, flag `--inplace-vertical-scaling`): a `replace` of a container's cpu
//! or memory request or limit can be applied in place when the pod's QoS class stays the same. Kruise's
//! webhook refuses these changes under InPlaceOnly even with its `InPlaceWorkloadVerticalScaling` gate on;
//! with the option on we admit exactly what its controllers can then apply without recreating the pod.

use serde_json::Value;

use crate::api::quantity;

/// A parsed resource quantity in nano-units (10⁻⁹), exact for every value Kubernetes can store
/// below about 10²⁰, which is enough to compare requests with limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Quantity(i128);

impl Quantity {
    /// Parse `resource.Quantity` text (or a JSON number) with the one quantity parser
    /// (`api::quantity`), in nano-units.
    pub fn parse(value: &Value) -> Option<Quantity> {
        quantity::from_value(value)?.nanos().map(Quantity)
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

/// The pod QoS class (`v1.PodQOSClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

const QOS_RESOURCES: [&str; 2] = ["cpu", "memory"];

/// The QoS class of a pod with this spec (upstream `GetPodQOS`): over all containers and init
/// containers, sum the non-zero cpu/memory requests and limits; no requests and no limits is
/// BestEffort; every container limiting both cpu and memory, with requests equal to limits, is
/// Guaranteed; anything else is Burstable. Unparsable quantities count as absent.
pub fn qos_class(pod_spec: &Value) -> QosClass {
    let mut requests = [None::<Quantity>; 2];
    let mut limits = [None::<Quantity>; 2];
    let mut guaranteed = true;
    let containers = ["initContainers", "containers"]
        .iter()
        .filter_map(|k| pod_spec.get(*k).and_then(Value::as_array))
        .flatten();
    for container in containers {
        let resources = container.get("resources");
        let mut limited = [false; 2];
        for (i, name) in QOS_RESOURCES.iter().enumerate() {
            let quantity = |kind: &str| {
                resources.and_then(|r| r.get(kind)).and_then(|m| m.get(*name)).and_then(Quantity::parse)
            };
            if let Some(q) = quantity("requests").filter(|q| !q.is_zero()) {
                requests[i] = Some(Quantity(requests[i].map_or(0, |s| s.0).saturating_add(q.0)));
            }
            if let Some(q) = quantity("limits").filter(|q| !q.is_zero()) {
                limits[i] = Some(Quantity(limits[i].map_or(0, |s| s.0).saturating_add(q.0)));
                limited[i] = true;
            }
        }
        guaranteed &= limited.iter().all(|l| *l);
    }
    if requests.iter().all(Option::is_none) && limits.iter().all(Option::is_none) {
        return QosClass::BestEffort;
    }
    let equal = (0..2).all(|i| match (requests[i], limits[i]) {
        (Some(r), Some(l)) => r == l,
        (Some(_), None) => false,
        (None, _) => true,
    });
    let same_keys =
        requests.iter().filter(|r| r.is_some()).count() == limits.iter().filter(|l| l.is_some()).count();
    if guaranteed && equal && same_keys { QosClass::Guaranteed } else { QosClass::Burstable }
}

/// Why a template-spec change under `/containers/N/resources/` cannot be applied in place, or
/// `None` when it can (a `replace` of a cpu/memory request or limit with a valid quantity).
/// `rest` is the path after `/containers/N/resources`.
pub fn resize_refusal(op: &str, rest: &str, value: Option<&Value>) -> Option<String> {
    let segments: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let [kind, name] = segments.as_slice() else {
        return Some("can not add or remove resources".into());
    };
    if !matches!(*kind, "limits" | "requests") {
        return Some(format!("disallowed inplace update resource field: {kind}"));
    }
    if op != "replace" {
        return Some("can not add or remove resources".into());
    }
    if !QOS_RESOURCES.contains(name) {
        return Some(format!("disallowed inplace update resource: {name}"));
    }
    if value.and_then(Quantity::parse).is_none() {
        return Some(format!("{kind} {name} is not a valid quantity"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn q(s: &str) -> Quantity {
        Quantity::parse(&json!(s)).unwrap()
    }

    #[test]
    fn quantities_compare_by_value() {
        assert_eq!(q("100m"), q("0.1"));
        assert_eq!(q("1Gi"), q("1073741824"));
        assert_eq!(q("1k"), q("1e3"));
        assert_eq!(Quantity::parse(&json!(2)), Some(q("2")));
        assert!(q("1Mi") > q("1M"));
        assert!(Quantity::parse(&json!("1x")).is_none());
        assert!(Quantity::parse(&json!("")).is_none());
        assert!(Quantity::parse(&json!(".")).is_none());
        assert!(Quantity::parse(&json!("1e2147483647")).is_none());
        // Far below a nano-unit: rounded up to one, as Kubernetes rounds sub-nano values.
        assert_eq!(Quantity::parse(&json!("1e-2147483648")), Some(q("1n")));
    }

    #[test]
    fn qos_classes() {
        let guaranteed = json!({"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1000m", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&guaranteed), QosClass::Guaranteed);
        let burstable = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(qos_class(&burstable), QosClass::Burstable);
        let unequal = json!({"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(&unequal), QosClass::Burstable);
        let one_container_unlimited = json!({"containers": [
            {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}}, {"name": "b"}]});
        assert_eq!(qos_class(&one_container_unlimited), QosClass::Burstable);
        assert_eq!(
            qos_class(&json!({"containers": [{"resources": {"requests": {"cpu": "0"}}}]})),
            QosClass::BestEffort
        );
        assert_eq!(qos_class(&json!({})), QosClass::BestEffort);
    }

    proptest::proptest! {
        #[test]
        fn parsing_any_text_never_panics(text in "\\PC{0,40}", digits in "[0-9]{1,60}(\\.[0-9]{0,40})?(Ki|Ei|E|m|n|e[0-9]{1,4}|e-[0-9]{1,4})?") {
            let _ = Quantity::parse(&json!(text));
            let _ = Quantity::parse(&json!(digits));
            let spec = json!({"containers": [{"resources": {"requests": {"cpu": digits.clone()}, "limits": {"cpu": digits.clone(), "memory": digits}}}]});
            let _ = qos_class(&spec);
        }
    }

    #[test]
    fn only_cpu_and_memory_replacements_resize() {
        assert_eq!(resize_refusal("replace", "/limits/cpu", Some(&json!("2"))), None);
        assert_eq!(resize_refusal("replace", "/requests/memory", Some(&json!("1Gi"))), None);
        assert_eq!(
            resize_refusal("add", "/limits/cpu", Some(&json!("2"))).as_deref(),
            Some("can not add or remove resources")
        );
        assert_eq!(
            resize_refusal("add", "/limits", Some(&json!({}))).as_deref(),
            Some("can not add or remove resources")
        );
        assert_eq!(
            resize_refusal("replace", "/limits/nvidia.com~1gpu", Some(&json!("1"))).as_deref(),
            Some("disallowed inplace update resource: nvidia.com~1gpu")
        );
        assert!(resize_refusal("replace", "/claims/0", Some(&json!("x"))).is_some());
        assert!(resize_refusal("replace", "/limits/cpu", Some(&json!("lots"))).is_some());
    }
}
