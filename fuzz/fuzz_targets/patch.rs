//! Patch generation: a JSON document (the input up to the first NUL byte), mutated at random (the
//! bytes after it drive the mutations: add, remove, replace, insert into and reorder arrays,
//! including arrays of named elements, which `diff` aligns by name). `diff(original, mutated)`
//! applied with the json-patch crate must give the mutated document exactly, and the diff the
//! other way round must give the original back.
#![no_main]

use kruise_admission::admission::patch::diff;
use kruise_admission_fuzz::{Bytes, apply};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};

fn fresh(b: &mut Bytes) -> Value {
    match b.below(6) {
        0 => Value::Null,
        1 => json!(b.byte()),
        2 => json!(format!("s{}", b.byte())),
        3 => json!({"name": format!("n{}", b.below(4)), "v": b.byte()}),
        4 => json!([b.byte(), {"name": format!("n{}", b.below(4))}]),
        _ => json!({format!("k~/{}", b.below(3)): b.byte()}),
    }
}

fn mutate(value: &mut Value, b: &mut Bytes, depth: usize) {
    if b.is_empty() || depth > 12 {
        return;
    }
    match value {
        Value::Object(map) => mutate_object(map, b, depth),
        Value::Array(items) => match b.below(6) {
            0 if !items.is_empty() => {
                let i = b.below(items.len());
                items.remove(i);
            }
            1 => {
                let i = b.below(items.len() + 1);
                items.insert(i, fresh(b));
            }
            2 if items.len() > 1 => {
                let (i, j) = (b.below(items.len()), b.below(items.len()));
                items.swap(i, j);
            }
            3 if !items.is_empty() => items.reverse(),
            _ if !items.is_empty() => {
                let i = b.below(items.len());
                mutate(&mut items[i], b, depth + 1);
            }
            _ => items.push(fresh(b)),
        },
        other => {
            if b.below(2) == 0 {
                *other = fresh(b);
            }
        }
    }
}

fn mutate_object(map: &mut Map<String, Value>, b: &mut Bytes, depth: usize) {
    let keys: Vec<String> = map.keys().cloned().collect();
    match b.below(5) {
        0 if !keys.is_empty() => {
            map.remove(&keys[b.below(keys.len())]);
        }
        1 => {
            let key = ["name", "x", "a/b", "m~n", ""][b.below(5)].to_owned();
            map.insert(key, fresh(b));
        }
        2 if !keys.is_empty() => {
            map.insert(keys[b.below(keys.len())].clone(), fresh(b));
        }
        _ if !keys.is_empty() => {
            let key = &keys[b.below(keys.len())];
            if let Some(child) = map.get_mut(key) {
                mutate(child, b, depth + 1);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let Ok(original) = serde_json::from_slice::<Value>(&data[..split]) else { return };
    let mut bytes = Bytes(data.get(split + 1..).unwrap_or_default());
    let mut mutated = original.clone();
    for _ in 0..1 + bytes.below(8) {
        mutate(&mut mutated, &mut bytes, 0);
    }
    let ops = diff(&original, &mutated);
    assert_eq!(apply(&original, &ops), mutated, "diff(original, mutated) applied to original");
    // And back: the same diff the other way round undoes the mutation.
    assert_eq!(
        apply(&mutated, &diff(&mutated, &original)),
        original,
        "diff(mutated, original) applied to mutated"
    );
    assert!(diff(&mutated, &mutated).is_empty(), "a document differs from itself");
});
