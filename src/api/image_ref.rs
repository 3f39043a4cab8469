//! Container image references as `distribution/reference.Parse` reads them (Kruise's
//! `util.ParseImage`): `name[:tag][@digest]`, the name not normalised (`busybox` stays `busybox`,
//! it does not become `docker.io/library/busybox`). PodUnavailableBudget's state check compares a
//! container's image with the image ID the kubelet reports by these parts.

use std::sync::LazyLock;

use regex::Regex;

/// The parts of a reference; empty when absent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef<'a> {
    pub repo: &'a str,
    pub tag: &'a str,
    pub digest: &'a str,
}

/// distribution/reference's grammar: an optional domain (host, optional port) then path
/// components, a tag, a digest. Anchored, as `reference.Parse` matches it.
static REFERENCE: LazyLock<Regex> = LazyLock::new(|| {
    let domain_component = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])";
    let host = format!(r"(?:{domain_component}(?:\.{domain_component})*|\[(?:[a-fA-F0-9:]+)\])");
    let domain = format!(r"{host}(?::[0-9]+)?");
    let path_component = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*";
    let name = format!(r"(?:{domain}/)?{path_component}(?:/{path_component})*");
    // Go's `\w` is ASCII; Rust's would take any Unicode letter (and compile to a far larger NFA).
    let tag = r"[0-9A-Za-z_][0-9A-Za-z_.-]{0,127}";
    let digest = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}";
    Regex::new(&format!(r"^({name})(?::({tag}))?(?:@({digest}))?$")).expect("the reference grammar compiles")
});

/// The longest name `reference.Parse` accepts.
const NAME_TOTAL_LENGTH_MAX: usize = 255;

/// Parse `image`, or `None` where `reference.Parse` fails (bad syntax, an upper-case name, a name
/// too long, a digest of an unknown algorithm or of the wrong length).
pub fn parse(image: &str) -> Option<ImageRef<'_>> {
    let captures = REFERENCE.captures(image)?;
    let repo = captures.get(1)?.as_str();
    if repo.len() > NAME_TOTAL_LENGTH_MAX {
        return None;
    }
    let tag = captures.get(2).map_or("", |m| m.as_str());
    let digest = captures.get(3).map_or("", |m| m.as_str());
    if !digest.is_empty() && !valid_digest(digest) {
        return None;
    }
    Some(ImageRef { repo, tag, digest })
}

/// `go-digest`'s `Validate`: an algorithm it knows, with the lower-case hex length of that algorithm.
fn valid_digest(digest: &str) -> bool {
    let Some((algorithm, encoded)) = digest.split_once(':') else { return false };
    let length = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return false,
    };
    encoded.len() == length && encoded.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// `util.IsImageDigest`: the reference parses and carries a digest.
pub fn is_digest(image: &str) -> bool {
    parse(image).is_some_and(|r| !r.digest.is_empty())
}

/// `util.IsContainerImageEqual`: two digest references are equal by repository and digest,
/// anything else by repository and tag; a reference that does not parse equals nothing.
pub fn same_image(a: &str, b: &str) -> bool {
    let (Some(a), Some(b)) = (parse(a), parse(b)) else { return false };
    if !a.digest.is_empty() && !b.digest.is_empty() {
        a.repo == b.repo && a.digest == b.digest
    } else {
        a.repo == b.repo && a.tag == b.tag
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "a9286defaba7b3a519d585ba0e37d0b2cbee74ebfe590960b0b1d6a5e97d1e1d";

    #[test]
    fn references_split_into_repository_tag_and_digest() {
        assert_eq!(parse("busybox"), Some(ImageRef { repo: "busybox", tag: "", digest: "" }));
        assert_eq!(
            parse("registry.example.com:5000/team/app:v1.2"),
            Some(ImageRef { repo: "registry.example.com:5000/team/app", tag: "v1.2", digest: "" })
        );
        let with_both = format!("docker.io/busybox:1.36@sha256:{SHA}");
        let parsed = parse(&with_both).unwrap();
        assert_eq!((parsed.repo, parsed.tag), ("docker.io/busybox", "1.36"));
        assert_eq!(parsed.digest, format!("sha256:{SHA}"));
        assert!(is_digest(&with_both) && !is_digest("busybox:1.36"));
    }

    #[test]
    fn what_reference_parse_refuses_does_not_parse() {
        for bad in [
            "",
            "Busybox",
            "busybox:",
            "busybox:vé1",
            "busybox@sha256:abc",
            &format!("busybox@md5:{SHA}"),
            "a//b",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(parse(&format!("busybox@sha256:{}", SHA.to_uppercase())), None);
        assert_eq!(parse(&"a".repeat(256)), None);
    }

    #[test]
    fn images_compare_by_digest_when_both_have_one() {
        let a = format!("app@sha256:{SHA}");
        assert!(same_image(&a, &format!("app:v1@sha256:{SHA}")));
        assert!(!same_image(&a, &format!("other@sha256:{SHA}")));
        assert!(same_image("app:v1", "app:v1") && !same_image("app:v1", "app"));
        // One side without a digest: tags compare, and neither has one.
        assert!(same_image(&a, "app"));
    }
}
