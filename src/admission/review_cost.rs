//! How much memory decoding a review will take, found by one cheap pass over its bytes before any
//! of it is decoded, so `serve` can refuse a body whose decoded form would not fit (issue 17.1).
//!
//! Decoded JSON is larger than its text: `object` and `oldObject` become trees ([`Json`]) of
//! 32-byte nodes, so `[0,0,0,…]` takes 16 bytes per byte of text and more while vectors grow.
//! The envelope (the few request fields decisions read, built as trees too) is charged as
//! `serde_json::Value`s would take it (with `preserve_order` every value an 80-byte slot, every
//! object member a hash-map entry around it), which bounds its trees from above: while decoded, a
//! tree's element takes at most four 32-byte slots (240 bytes charged) and a member three 56-byte
//! ones plus 25 bytes of sorting scratch (242 charged), and a key is borrowed, not copied. The
//! scan charges each value what [`decode_review_body`](super::review::decode_review_body) will
//! allocate for it, as an upper bound, counting only the parts that are built: the envelope, and
//! `object` / `oldObject` as the operation found by the same scan selects them
//! ([`Parts::for_operation`]).
//!
//! The scan costs about a third of what decoding does, and most reviews are small: a body shorter
//! than [`SCAN_FROM`] is not scanned but charged [`worst_case`] for its length, which bounds what
//! the scan could find in any bytes of that length (issue 20.3; [`charge`]).

use std::borrow::Cow;
use std::mem::size_of;

use serde_json::Value;

use super::review::{Operation, Parts};
use crate::api::tree::Json;

/// What one representation of decoded JSON takes, per piece of text.
struct Model {
    /// A value's slot in an array. Vectors grow by doubling: up to twice the slots in use, and
    /// three times while the last doubling copies them (measured: `[{},{},…]` peaks at 3× when
    /// the reallocation cannot grow in place).
    array_slot: usize,
    /// A member of an object, with room for growth.
    object_slot: usize,
    /// What an object's first member allocates besides its slot.
    object_first: usize,
    /// Whether strings without escapes get heap of their own (else they borrow the body).
    owns_plain_strings: bool,
}

impl Model {
    /// The most the scan charges a container with the bytes it owns: an object in an array (its
    /// slot and block) with a first member (the first member's extra and its slot).
    const fn container(&self) -> usize {
        self.array_slot + BLOCK_OVERHEAD + self.object_first + self.object_slot
    }

    /// The most the scan charges per byte, over the patterns [`worst_case`] lists.
    const fn per_byte(&self) -> usize {
        max(
            max(self.container().div_ceil(4), (2 * self.array_slot + BLOCK_OVERHEAD).div_ceil(3)),
            max(self.array_slot.div_ceil(2), self.object_slot.div_ceil(3)),
        )
    }

    fn string_heap(&self, len: usize, escaped: bool) -> usize {
        if escaped || self.owns_plain_strings { string_heap(len) } else { 0 }
    }
}

/// An index-map entry: hash, key, value.
const ENTRY: usize = size_of::<(u64, String, Value)>();

/// What the envelope is charged (`userInfo`, the request's small fields): as `serde_json::Value`s.
const VALUE: Model = Model {
    array_slot: 3 * size_of::<Value>(),
    // The entry plus its index, doubled for growth.
    object_slot: 2 * (ENTRY + size_of::<usize>() + 1),
    // The smallest index map holds three entries and four index buckets, more than one slot
    // covers (a one-key object is about 400 resident bytes; from two members on, the slots cover it).
    object_first: ENTRY + 4 * (size_of::<usize>() + 1) + 2 * BLOCK_OVERHEAD,
    owns_plain_strings: true,
};

/// `object` and `oldObject`: trees ([`Json`]), strings borrowed from the body unless they had
/// escapes. Each container is allocated once, at its length, so a value costs its slot; while
/// containers are open their values wait on two stacks that grow by doubling, which [`Stacks`]
/// charges from the most values waiting at once; an array of more than [`LARGE_ARRAY`] elements
/// grows in a vector of its own, by doubling.
const TREE: Model = Model {
    array_slot: size_of::<Json>(),
    object_slot: size_of::<(Cow<str>, Json)>(),
    object_first: 0,
    owns_plain_strings: false,
};

/// `api::tree`'s threshold: a longer array leaves the stack and grows on its own.
const LARGE_ARRAY: usize = 1024;
/// `api::tree` finds repeated keys of a larger object by sorting.
const SORTED_FROM: usize = 17;
/// The scratch that sorting takes per member: an index, a flag, and a pair per repeated key.
const SORT_SCRATCH: usize = 3 * size_of::<usize>() + 1;

/// The stacks a tree is decoded through (`api::tree`), for one part: a stack's capacity is at most
/// twice the most entries it held, and three times while its last doubling copies them.
#[derive(Default, Clone, Copy)]
struct Stacks {
    elements: usize,
    members: usize,
    peak_elements: usize,
    peak_members: usize,
    largest_object: usize,
}

impl Stacks {
    fn push_element(&mut self) {
        self.elements += 1;
        self.peak_elements = self.peak_elements.max(self.elements);
    }

    fn push_member(&mut self) {
        self.members += 1;
        self.peak_members = self.peak_members.max(self.members);
    }

    /// A container closed (or left open at the end) with `count` values: the stack gives back
    /// what it held of them; a large array had grown on its own, by doubling.
    fn close(&mut self, is_object: bool, count: usize) -> usize {
        if is_object {
            self.members -= count;
            self.largest_object = self.largest_object.max(count);
            0
        } else {
            self.elements -= count.min(LARGE_ARRAY);
            if count > LARGE_ARRAY { 2 * count * TREE.array_slot } else { 0 }
        }
    }

    fn charge(&self) -> usize {
        let sorting = if self.largest_object >= SORTED_FROM { self.largest_object * SORT_SCRATCH } else { 0 };
        3 * (self.peak_elements * TREE.array_slot + self.peak_members * TREE.object_slot) + sorting
    }
}

const fn model(part: Part) -> &'static Model {
    match part {
        Part::Envelope => &VALUE,
        Part::Object | Part::OldObject => &TREE,
    }
}

/// What the allocator adds to each heap block (header and size-class rounding, at most).
const BLOCK_OVERHEAD: usize = 16;

/// serde_json's nesting limit.
const MAX_DEPTH: usize = 128;

/// Bodies shorter than this are charged [`worst_case`] instead of being scanned. A real Pod CREATE
/// is 2–15 KB (the benchmarks' typical Pod 10 KB, the largest recorded review 14 KB), so almost
/// every review skips the scan; and the eight workers that decode (`DEFAULT_WORKERS`) holding the
/// worst case of a body just under it, twice (with the decision's working copy), hold about 80 MiB:
/// half of the default `--max-in-flight-bytes`, leaving the rest to bodies being read and to large
/// reviews, which are scanned and charged what they take.
pub const SCAN_FROM: usize = 32 << 10;

/// The most the scan charges a container with the bytes it owns, in either representation.
const CONTAINER: usize = max(VALUE.container(), TREE.container());

/// The most the scan charges per byte, in either representation.
const PER_BYTE: usize = max(VALUE.per_byte(), TREE.per_byte());

/// The largest array slot, for the one token a body may end in.
const ARRAY_SLOT: usize = max(VALUE.array_slot, TREE.array_slot);

const fn max(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

/// Heap bytes for a string of `len` bytes of JSON text (its decoded form is never longer).
fn string_heap(len: usize) -> usize {
    if len == 0 { 0 } else { len.next_multiple_of(16) + BLOCK_OVERHEAD }
}

/// The scan's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReviewCost {
    /// Bytes the values built by `decode_review_body(body, self.parts())` take at most.
    pub decoded: usize,
    /// `request.operation` (the last one, as the decoder sees it), when it is plain text.
    pub operation: Option<Operation>,
}

impl ReviewCost {
    /// What the decoder must build: the parts the apiserver fills in for this operation.
    pub fn parts(&self) -> Parts {
        Parts::for_operation(self.operation)
    }
}

/// Where a value sits, for charging it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Envelope,
    Object,
    OldObject,
}

/// A container being scanned.
struct Frame {
    is_object: bool,
    /// The top level, or the top level's `request`: their keys decide where values are charged.
    role: Role,
    part: Part,
    /// The key of the member whose value comes next (objects only).
    key: Key,
    /// Whether a member was seen (objects only; an empty object allocates nothing).
    has_members: bool,
    /// Values seen so far (members or elements).
    count: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Top,
    Request,
    Inside,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Request,
    Object,
    OldObject,
    Operation,
    Other,
}

impl Key {
    /// Only exact, unescaped spellings match; an escaped key is charged as envelope, which is
    /// always charged, so the bound holds whatever the decoder makes of it.
    fn of(raw: &[u8], role: Role) -> Key {
        match (role, raw) {
            (Role::Top, b"request") => Key::Request,
            (Role::Request, b"object") => Key::Object,
            (Role::Request, b"oldObject") => Key::OldObject,
            (Role::Request, b"operation") => Key::Operation,
            _ => Key::Other,
        }
    }
}

/// What decoding any body of `len` bytes can take, at most: more than [`review_cost`] charges any
/// `len` bytes (for every part), hence more than decoding them can allocate.
///
/// Why: give each charge bytes of its own, no byte to two of them, and take the most any of them
/// costs per byte ([`PER_BYTE`]). A container that is closed owns its opening and closing bytes
/// and its first key (two or more bytes: `,""` or `""`): at most [`CONTAINER`] for four bytes
/// (`[{""}{""}…]`, the worst on this build, as `Value`s), a key's heap adding less than a byte costs. An
/// array's scalar followed by the array's closing byte owns only itself: at most one per closed
/// array, counted with it (`[[0][0]…]`: two slots and a block for three bytes). Any other scalar of
/// an array owns its byte and the delimiter after it (`[0,0,…]`: a slot for two bytes), a string
/// value its two quotes (less), a later key the comma before it and its quotes (an object slot for
/// three bytes); a member's value has no slot of its own, and the top level's is smaller. What is
/// left: containers never closed, at most [`MAX_DEPTH`] (the scan stops deeper), and one token cut
/// off by the end of the body, charged whole. `tests::the_worst_case_bounds_the_scan` scans bodies
/// of each pattern and of random tokens against it.
pub fn worst_case(len: usize) -> usize {
    len.saturating_mul(PER_BYTE).saturating_add(MAX_DEPTH * CONTAINER + ARRAY_SLOT)
}

/// What a request costs to hold and to decide, as far as is known before it is decoded (issue
/// 30.6): the server keeps part of its memory budget and of its workers for cheap requests, so a
/// flood of multi-MiB reviews queues (or is shed) behind itself while the API server's ordinary
/// small reviews keep being served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cost {
    Cheap,
    Heavy,
}

impl Cost {
    /// By the body's length: a review shorter than [`SCAN_FROM`] (almost every one the API server
    /// sends; a Pod with many containers is a few tens of KiB) is cheap to decode and decide; past
    /// it, time and memory grow with the bytes.
    pub fn of_body(len: usize) -> Cost {
        if len < SCAN_FROM { Cost::Cheap } else { Cost::Heavy }
    }
}

/// Charge decoding `body` through `hold` (bytes the decoded values will take; `Err` when they
/// cannot be held) and say which parts to decode. A body shorter than [`SCAN_FROM`] is charged
/// [`worst_case`] and decoded whole ([`Parts::ALL`]: the answer is the same, `decode_review`
/// drops what the operation leaves empty); when that cannot be held, or the body is larger, it is
/// scanned and charged what [`review_cost`] finds, so nothing is refused that the scan would let in.
pub fn charge<E>(body: &[u8], mut hold: impl FnMut(usize) -> Result<(), E>) -> Result<Parts, E> {
    if body.len() < SCAN_FROM && hold(worst_case(body.len())).is_ok() {
        return Ok(Parts::ALL);
    }
    let cost = review_cost(body);
    hold(cost.decoded)?;
    Ok(cost.parts())
}

/// Scan a review body. Never fails: text that is not JSON is charged as far as it goes and left
/// to the decoder to refuse (it allocates no more than this counted for the same bytes).
pub fn review_cost(body: &[u8]) -> ReviewCost {
    scan(body).finish()
}

fn scan(body: &[u8]) -> Scan {
    let mut scan = Scan::default();
    let mut i = 0;
    while i < body.len() {
        match scan.step(body, i) {
            Some(next) => i = next,
            None => break,
        }
    }
    scan
}

/// The part a member's value belongs to: `request.object` and `request.oldObject` start their
/// own; everything else stays in its container's.
fn member_part(frame: &Frame) -> Part {
    match (frame.role, frame.key) {
        (Role::Request, Key::Object) => Part::Object,
        (Role::Request, Key::OldObject) => Part::OldObject,
        _ => frame.part,
    }
}

/// The scan's state between tokens.
#[derive(Default)]
struct Scan {
    stack: Vec<Frame>,
    /// Bytes charged to each [`Part`].
    charged: [usize; 3],
    operation: Option<Operation>,
    /// After `{` or `,` in an object, the next string is a key.
    expect_key: bool,
    /// The decoder's stacks for each part that is a tree.
    stacks: [Stacks; 3],
}

const fn is_tree(part: Part) -> bool {
    !matches!(part, Part::Envelope)
}

impl Scan {
    /// A value starts in the innermost container: an array counts it, and a tree's array holds
    /// it on the elements' stack (up to [`LARGE_ARRAY`]).
    fn element_starts(&mut self) {
        if let Some(frame) = self.stack.last_mut().filter(|f| !f.is_object) {
            frame.count += 1;
            if is_tree(frame.part) && frame.count <= LARGE_ARRAY {
                self.stacks[frame.part as usize].push_element();
            }
        }
    }

    /// The innermost container closes (or is left open at the end of the body).
    fn close(&mut self) {
        if let Some(frame) = self.stack.pop()
            && is_tree(frame.part)
        {
            self.charged[frame.part as usize] +=
                self.stacks[frame.part as usize].close(frame.is_object, frame.count);
        }
    }

    /// The role and part of a value starting now, and its slot in its parent.
    fn position(&self) -> (Role, Part, usize) {
        match self.stack.last() {
            None => (Role::Top, Part::Envelope, size_of::<Value>()),
            Some(parent) if parent.is_object => {
                let role = if parent.role == Role::Top && parent.key == Key::Request {
                    Role::Request
                } else {
                    Role::Inside
                };
                // The member's slot was charged with its key.
                (role, member_part(parent), 0)
            }
            Some(parent) => (Role::Inside, parent.part, model(parent.part).array_slot),
        }
    }

    /// Scan the token at `i`: the index after it, or `None` when nothing after it is ever built.
    fn step(&mut self, body: &[u8], i: usize) -> Option<usize> {
        let (role, part, slot) = self.position();
        match body[i] {
            // serde_json refuses the 128th level of nesting: nothing after it is ever built.
            b'{' | b'[' if self.stack.len() >= MAX_DEPTH => return None,
            byte @ (b'{' | b'[') => {
                self.element_starts();
                self.open(byte == b'{', role, part, slot);
            }
            b'}' | b']' => {
                self.close();
                self.expect_key = false;
            }
            b',' => self.expect_key = self.stack.last().is_some_and(|f| f.is_object),
            b'"' => {
                if !self.expect_key {
                    self.element_starts();
                }
                return Some(self.string(body, i, part, slot));
            }
            b' ' | b'\t' | b'\n' | b'\r' | b':' => {}
            _ => {
                self.element_starts();
                return Some(self.scalar(body, i, part, slot));
            }
        }
        Some(i + 1)
    }

    fn open(&mut self, is_object: bool, role: Role, part: Part, slot: usize) {
        self.charged[part as usize] += slot + BLOCK_OVERHEAD;
        if role == Role::Request {
            self.operation = None; // a later `request` replaces an earlier one whole
        }
        self.stack.push(Frame { is_object, role, part, key: Key::Other, has_members: false, count: 0 });
        self.expect_key = is_object;
    }

    /// A string starting at `i` (its opening quote): a key or a value. The index after it.
    fn string(&mut self, body: &[u8], i: usize, part: Part, slot: usize) -> usize {
        let (len, escaped) = string_at(body, i + 1);
        let text = &body[i + 1..(i + 1 + len).min(body.len())];
        match self.stack.last_mut() {
            Some(frame) if frame.is_object && self.expect_key => {
                frame.key = if escaped { Key::Other } else { Key::of(text, frame.role) };
                let model = model(member_part(frame));
                let first = if frame.has_members { 0 } else { model.object_first };
                frame.has_members = true;
                frame.count += 1;
                if is_tree(frame.part) {
                    self.stacks[frame.part as usize].push_member();
                }
                self.charged[member_part(frame) as usize] +=
                    first + model.object_slot + model.string_heap(len, escaped);
                self.expect_key = false;
            }
            Some(frame) => {
                if frame.role == Role::Request && frame.key == Key::Operation {
                    self.operation = if escaped {
                        None
                    } else {
                        std::str::from_utf8(text).ok().and_then(Operation::parse).map(|(op, _)| op)
                    };
                }
                self.charged[part as usize] += slot + model(part).string_heap(len, escaped);
            }
            None => self.charged[part as usize] += slot + model(part).string_heap(len, escaped),
        }
        i + 1 + len + 1
    }

    /// A number or a literal starting at `i`: no heap of its own. The index after it.
    fn scalar(&mut self, body: &[u8], i: usize, part: Part, slot: usize) -> usize {
        if let Some(frame) = self.stack.last()
            && frame.role == Role::Request
            && frame.key == Key::Operation
        {
            self.operation = None;
        }
        self.charged[part as usize] += slot;
        i + body[i..]
            .iter()
            .position(|b| matches!(b, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r' | b':'))
            .unwrap_or(body.len() - i)
    }

    /// The charges of the parts the decoder builds for the operation found.
    /// Close what the body left open and charge the trees' stacks.
    fn settle(&mut self) {
        while !self.stack.is_empty() {
            self.close();
        }
        for part in [Part::Object, Part::OldObject] {
            self.charged[part as usize] += self.stacks[part as usize].charge();
        }
    }

    fn finish(mut self) -> ReviewCost {
        self.settle();
        let parts = Parts::for_operation(self.operation);
        let charged = |part: Part| self.charged[part as usize];
        let decoded = charged(Part::Envelope)
            + if parts.object { charged(Part::Object) } else { 0 }
            + if parts.old_object { charged(Part::OldObject) } else { 0 };
        ReviewCost { decoded, operation: self.operation }
    }
}

/// The length of the string whose text starts at `start` (after the opening quote), up to its
/// closing quote or the end of the body, and whether it has escapes.
fn string_at(body: &[u8], start: usize) -> (usize, bool) {
    let mut escaped = false;
    let mut j = start;
    while j < body.len() {
        match body[j] {
            b'"' => return (j - start, escaped),
            b'\\' => {
                escaped = true;
                j += 2;
            }
            _ => j += 1,
        }
    }
    (body.len() - start, escaped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admission::review::decode_review_body;

    fn review(operation: &str, object: &str, old_object: &str) -> String {
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{{"uid":"u","operation":"{operation}","object":{object},"oldObject":{old_object}}}}}"#
        )
    }

    #[test]
    fn finds_the_operation_and_charges_only_the_parts_it_builds() {
        let big = format!("[{}0]", "0,".repeat(10_000));
        let create = review_cost(
            review("CREATE", &format!(r#"{{"x":{big}}}"#), &format!(r#"{{"x":{big}}}"#)).as_bytes(),
        );
        assert_eq!(create.operation, Some(Operation::Create));
        assert_eq!(create.parts(), Parts { object: true, old_object: false });
        let update = review_cost(
            review("UPDATE", &format!(r#"{{"x":{big}}}"#), &format!(r#"{{"x":{big}}}"#)).as_bytes(),
        );
        assert_eq!(update.parts(), Parts::ALL);
        assert!(update.decoded > create.decoded + 10_000 * TREE.array_slot, "{update:?} {create:?}");
        let delete = review_cost(review("DELETE", "null", &format!(r#"{{"x":{big}}}"#)).as_bytes());
        assert_eq!(delete.parts(), Parts { object: false, old_object: true });
    }

    #[test]
    fn the_last_request_and_operation_count_and_escapes_mean_unknown() {
        let two = r#"{"request":{"operation":"DELETE"},"request":{"operation":"CREATE"}}"#;
        assert_eq!(review_cost(two.as_bytes()).operation, Some(Operation::Create));
        let reset = r#"{"request":{"operation":"DELETE"},"request":{"uid":"u"}}"#;
        assert_eq!(review_cost(reset.as_bytes()).operation, None);
        let escaped = r#"{"request":{"operation":"DEL\u0045TE"}}"#;
        assert_eq!(review_cost(escaped.as_bytes()).operation, None);
        let nested = r#"{"request":{"object":{"operation":"DELETE"}}}"#;
        assert_eq!(review_cost(nested.as_bytes()).operation, None);
        let lower = r#"{"request":{"operation":"delete"}}"#;
        assert_eq!(
            review_cost(lower.as_bytes()).operation,
            Some(Operation::Delete),
            "decode_review accepts any case"
        );
    }

    #[test]
    fn strings_with_quotes_and_brackets_inside_do_not_confuse_it() {
        let tricky = review("CREATE", r#"{"a":"x\"]}{[","b":"\\"}"#, r#"{"c":[1,2]}"#);
        let cost = review_cost(tricky.as_bytes());
        assert_eq!(cost.operation, Some(Operation::Create));
        // Garbage is charged too, without panicking.
        for junk in ["", "\"", "\"\\", "{{{{", "]]]", "{\"request\":", "nul", "[1,"] {
            review_cost(junk.as_bytes());
        }
    }

    /// What the scan charges `body` for every part.
    fn charged_all(body: &[u8]) -> usize {
        let mut scan = scan(body);
        scan.settle();
        scan.charged.iter().sum()
    }

    #[test]
    fn the_worst_case_bounds_the_scan() {
        let repeat = |open: &str, unit: &str, len: usize| {
            let mut body = open.to_owned();
            while body.len() + unit.len() <= len {
                body.push_str(unit);
            }
            body.into_bytes()
        };
        // The patterns `worst_case` names, at lengths around `SCAN_FROM`; deep openings first.
        let deep = "[".repeat(MAX_DEPTH - 1);
        let mut bodies = Vec::new();
        for len in [1, 7, 1000, SCAN_FROM - 1, SCAN_FROM, 3 * SCAN_FROM] {
            for (open, unit) in [
                ("[", r#"{""}"#),
                ("[", "[0]"),
                ("[", "0,"),
                ("[", r#""""#),
                ("{", r#","""#),
                ("[", r#"{"a":0},"#),
                ("", "["),
                ("", r#"{""}"#),
                (deep.as_str(), r#"{""}"#),
                (deep.as_str(), "[0]"),
                (deep.as_str(), "["),
                (deep.as_str(), "{"),
            ] {
                bodies.push(repeat(open, unit, len));
            }
        }
        // And random tokens (a fixed xorshift sequence).
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        const TOKENS: &[&str] = &["{", "}", "[", "]", "\"", ",", ":", "0", " ", "\\", "a", "{\"\"", "[0"];
        for _ in 0..3000 {
            let len = (next() % 2000) as usize + 1;
            let mut body = Vec::with_capacity(len);
            while body.len() < len {
                body.extend_from_slice(TOKENS[(next() % TOKENS.len() as u64) as usize].as_bytes());
            }
            bodies.push(body);
        }
        // The same patterns inside `object`, where they are decoded as trees.
        let in_object: Vec<Vec<u8>> =
            bodies.iter().map(|b| [br#"{"request":{"object":"#.as_slice(), b].concat()).collect();
        bodies.extend(in_object);
        for body in &bodies {
            let charged = charged_all(body);
            assert!(
                charged <= worst_case(body.len()),
                "{charged} > {} for {}",
                worst_case(body.len()),
                String::from_utf8_lossy(&body[..body.len().min(200)])
            );
        }
        // The bound is tight: objects of one empty key reach its rate.
        let worst = repeat("[", r#"{""}"#, SCAN_FROM);
        assert!(charged_all(&worst) * 100 >= PER_BYTE * worst.len() * 99, "{}", charged_all(&worst));
    }

    #[test]
    fn a_small_body_is_charged_its_worst_case_without_a_scan_unless_that_cannot_be_held() {
        let small = review("CREATE", r#"{"metadata":{"name":"p"}}"#, r#"{"metadata":{"name":"old"}}"#);
        let scanned = review_cost(small.as_bytes());
        let mut asked = Vec::new();
        let parts = charge(small.as_bytes(), |bytes| {
            asked.push(bytes);
            Ok::<_, ()>(())
        });
        assert_eq!(parts, Ok(Parts::ALL));
        assert_eq!(asked, [worst_case(small.len())]);
        assert!(worst_case(small.len()) > 10 * scanned.decoded);
        // Refused (a small `--max-in-flight-bytes`): scanned and charged what the scan finds.
        asked.clear();
        let parts = charge(small.as_bytes(), |bytes| {
            asked.push(bytes);
            if bytes > scanned.decoded { Err(()) } else { Ok(()) }
        });
        assert_eq!(parts, Ok(scanned.parts()));
        assert_eq!(asked, [worst_case(small.len()), scanned.decoded]);
        // From `SCAN_FROM` on, scanned at once; a refusal of what it finds is the answer.
        let large = review("CREATE", &format!(r#"{{"x":"{}"}}"#, "x".repeat(SCAN_FROM)), "null");
        let found = review_cost(large.as_bytes()).decoded;
        asked.clear();
        let parts = charge(large.as_bytes(), |bytes| {
            asked.push(bytes);
            Err::<(), _>(bytes)
        });
        assert_eq!(parts, Err(found));
        assert_eq!(asked, [found]);
    }

    #[test]
    fn the_decoder_builds_what_the_scan_selected() {
        let body = review("CREATE", r#"{"metadata":{"name":"p"}}"#, r#"{"metadata":{"name":"old"}}"#);
        let cost = review_cost(body.as_bytes());
        let request = decode_review_body(body.as_bytes(), cost.parts()).unwrap().unwrap();
        assert!(request.object.is_some());
        assert!(request.old_object.is_none(), "CREATE carries no oldObject");
    }
}
