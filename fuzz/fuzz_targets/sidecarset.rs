//! SidecarSet parsing: arbitrary text read as YAML/JSON documents (the cluster folder's reader),
//! each document read as a SidecarSet (v1alpha1 or v1beta1), all of them loaded into a snapshot.
#![no_main]

use kruise_admission::api::sidecarset::SidecarSet;
use kruise_admission::cluster::{Snapshot, files};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(documents) = files::read_documents(text) else { return };
    for document in &documents {
        if let Ok(sidecarset) = SidecarSet::from_value(document) {
            // What was read serializes back (the hashes and the injection read it this way).
            let _ = serde_json::to_value(&sidecarset).expect("a parsed SidecarSet serializes");
        }
    }
    let snapshot = Snapshot::from_objects(documents);
    let _ = snapshot.len();
});
