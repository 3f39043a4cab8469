//! Names and ids that Kubernetes and Kruise generate at random, drawn from `inputs.random` so that
//! tests and `dry-run` are deterministic: a pod name for a `generateName` (the API server's, which
//! launch priority needs early) and the UUID WorkloadSpread records a still unnamed pod under.

use super::Random;

/// The characters of a generated name's suffix (apimachinery `util/rand`: no vowels), its length,
/// and the longest base kept (apiserver `storage/names.SimpleNameGenerator`).
pub const NAME_SUFFIX_CHARS: &[u8; 27] = b"bcdfghjklmnpqrstvwxz2456789";
const NAME_SUFFIX_LEN: usize = 5;
const MAX_GENERATED_BASE: usize = 63 - NAME_SUFFIX_LEN;

/// `SimpleNameGenerator.GenerateName`. Go cuts the base at a byte; a character cut in two is
/// written as one U+FFFD per byte left, as Go's JSON encoder writes those bytes.
pub fn name(base: &str, random: &dyn Random) -> String {
    let mut name = String::with_capacity(MAX_GENERATED_BASE + NAME_SUFFIX_LEN);
    if base.len() <= MAX_GENERATED_BASE {
        name.push_str(base);
    } else {
        let cut = (0..=MAX_GENERATED_BASE).rev().find(|i| base.is_char_boundary(*i)).unwrap_or(0);
        name.push_str(&base[..cut]);
        name.extend(std::iter::repeat_n('\u{fffd}', MAX_GENERATED_BASE - cut));
    }
    for _ in 0..NAME_SUFFIX_LEN {
        let i = (random.uniform() * NAME_SUFFIX_CHARS.len() as f64) as usize;
        name.push(NAME_SUFFIX_CHARS[i.min(NAME_SUFFIX_CHARS.len() - 1)] as char);
    }
    name
}

/// `uuid.NewUUID()` of apimachinery: a random (version 4, RFC 4122 variant) UUID in its
/// lower-case hyphenated form.
pub fn uuid(random: &dyn Random) -> String {
    let mut bytes = [0u8; 16];
    for b in &mut bytes {
        *b = (random.uniform() * 256.0).min(255.0) as u8;
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::SeededRandom;

    #[test]
    fn generated_names_are_cut_as_go_cuts_them() {
        let random = SeededRandom::new(7);
        let long = "a".repeat(70);
        let generated = name(&long, &random);
        assert_eq!(generated.len(), 63);
        assert!(generated.starts_with(&"a".repeat(58)));
        // 57 ASCII bytes then a 3-byte character: two of its bytes are cut off.
        let cut = format!("{}€", "a".repeat(57));
        let generated = name(&cut, &random);
        assert_eq!(generated.chars().filter(|c| *c == '\u{fffd}').count(), 1, "{generated}");
        let same = |seed| name("x-", &SeededRandom::new(seed));
        assert_eq!(same(1), same(1), "the seed decides the suffix");
    }

    #[test]
    fn uuids_are_version_4() {
        let random = SeededRandom::new(3);
        let id = uuid(&random);
        assert_eq!(id.len(), 36, "{id}");
        assert_eq!(id.as_bytes()[14], b'4', "{id}");
        assert!(matches!(id.as_bytes()[19], b'8' | b'9' | b'a' | b'b'), "{id}");
        assert!(id.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit() && !b.is_ascii_uppercase()), "{id}");
        assert_ne!(uuid(&random), id, "each draw is new");
    }
}
