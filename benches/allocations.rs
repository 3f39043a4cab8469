//! Heap allocations per `/mutate-pod` decision (`webhooks::decide`, what `serve` answers), counted
//! by a global allocator that wraps the system one, for the pods of `benches/inject.rs` against 10
//! and 1,000 SidecarSets of which 3 match. The count does not depend on the allocator, but the
//! library installs mimalloc as the global allocator by default, so this bench needs
//! `cargo bench --bench allocations --no-default-features` (with the default features it says so
//! and stops).

#[path = "support/mod.rs"]
mod support;

#[cfg(not(feature = "mimalloc"))]
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicU64, Ordering};

    pub static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
    pub static BYTES: AtomicU64 = AtomicU64::new(0);

    /// The system allocator, counting every allocation (a reallocation counts as one).
    pub struct Counting;

    // SAFETY: every call is forwarded unchanged to `System`; the counters are plain atomics.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
            // SAFETY: the caller's contract is `System::alloc`'s.
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            // SAFETY: `ptr` came from `System` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
            BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
            // SAFETY: as for `System::realloc`.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static GLOBAL: Counting = Counting;

    pub fn now() -> (u64, u64) {
        (ALLOCATIONS.load(Ordering::Relaxed), BYTES.load(Ordering::Relaxed))
    }
}

#[cfg(feature = "mimalloc")]
fn main() {
    eprintln!(
        "allocations: run with --no-default-features (the library's mimalloc is the global allocator otherwise)"
    );
}

#[cfg(not(feature = "mimalloc"))]
fn main() {
    use kruise_admission::admission::review::decode_review;
    use kruise_admission::admission::webhooks;
    use kruise_admission::admission::{FixedClock, Inputs, SeededRandom, Settings};
    use kruise_admission::cluster::Answers;

    const ROUNDS: u64 = 200;
    let webhook = webhooks::by_path("/mutate-pod").expect("registered");
    let (clock, random) =
        (FixedClock(time::macros::datetime!(2026-07-02 09:56:09 UTC)), SeededRandom::new(1));
    let (settings, answers) = (Settings::default(), Answers::default());
    println!("| pod, SidecarSets | allocations per decide | bytes allocated per decide | patch operations |");
    println!("|---|---:|---:|---:|");
    for (name, pod) in support::pods() {
        let request = decode_review(support::pod_review(&pod)).expect("review");
        for total in [10usize, 1_000] {
            let snapshot = support::snapshot(&pod, total);
            let _ = snapshot.sidecarset_index();
            let inputs = Inputs {
                cluster: &snapshot,
                answers: &answers,
                clock: &clock,
                random: &random,
                settings: &settings,
            };
            // Warm up: lazily built caches (the index's compiled patterns) are not per decision.
            let first = webhooks::decide(webhook, &request, &inputs);
            assert!(first.allowed && !first.patch.is_empty(), "{name}/{total}: {:?}", first.status);
            let (count, bytes) = counting::now();
            for _ in 0..ROUNDS {
                std::hint::black_box(webhooks::decide(webhook, std::hint::black_box(&request), &inputs));
            }
            let (count_after, bytes_after) = counting::now();
            println!(
                "| {name}, {total} | {} | {} | {} |",
                (count_after - count) / ROUNDS,
                (bytes_after - bytes) / ROUNDS,
                first.patch.len()
            );
        }
    }
}
