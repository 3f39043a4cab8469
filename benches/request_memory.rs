//! Where the peak memory of one admitted request comes from, stage by stage (issue 17.1): the
//! body `benches/request_memory.py` sends (a Pod CREATE for `/mutate-pod` dense with environment
//! variables, or one of its other shapes), taken through the steps `serve` takes — the cost scan,
//! the decode, the decision against `examples/cluster`, the answer — under a global allocator that
//! tracks the bytes live and their peak. It prints, per stage, the live bytes after it and the
//! peak during it, each as a multiple of the body. Heap only: the process's own RSS (TLS and HTTP
//! buffers, thread stacks, allocator overhead) is `benches/request_memory.sh`'s.
//!
//! `cargo bench --bench request_memory --no-default-features [-- BYTES [SHAPE]]` (the library's
//! mimalloc is the global allocator otherwise; defaults: 3 MiB, `env-vars`).

#[cfg(not(feature = "mimalloc"))]
mod tracking {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::sync::atomic::{AtomicUsize, Ordering};

    static LIVE: AtomicUsize = AtomicUsize::new(0);
    static PEAK: AtomicUsize = AtomicUsize::new(0);

    /// The system allocator, tracking the bytes requested and not yet freed, and their maximum.
    pub struct Tracking;

    fn grew(by: usize) {
        let live = LIVE.fetch_add(by, Ordering::Relaxed) + by;
        PEAK.fetch_max(live, Ordering::Relaxed);
    }

    // SAFETY: every call is forwarded unchanged to `System`; the counters are plain atomics.
    unsafe impl GlobalAlloc for Tracking {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            grew(layout.size());
            // SAFETY: the caller's contract is `System::alloc`'s.
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            // SAFETY: `ptr` came from `System` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }

        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            // Counted as the allocator may do it: the new block before the old one is freed.
            grew(new_size);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            // SAFETY: as for `System::realloc`.
            unsafe { System.realloc(ptr, layout, new_size) }
        }
    }

    #[global_allocator]
    static GLOBAL: Tracking = Tracking;

    pub fn live() -> usize {
        LIVE.load(Ordering::Relaxed)
    }

    /// Start a new stage: its peak is measured from what is live now.
    pub fn reset_peak() {
        PEAK.store(live(), Ordering::Relaxed);
    }

    pub fn peak() -> usize {
        PEAK.load(Ordering::Relaxed)
    }
}

#[cfg(feature = "mimalloc")]
fn main() {
    eprintln!(
        "request_memory: run with --no-default-features (the library's mimalloc is the global allocator otherwise)"
    );
}

#[cfg(not(feature = "mimalloc"))]
fn main() {
    use std::path::Path;

    use kruise_admission::admission::review::{self, decode_review_body};
    use kruise_admission::admission::review_cost::review_cost;
    use kruise_admission::admission::webhooks;
    use kruise_admission::admission::{Inputs, SystemClock, ThreadRandom};
    use kruise_admission::cluster::Answers;
    use kruise_admission::cluster::files::load_dir;
    use tracking::{live, peak, reset_peak};

    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let bytes: usize = args.next().map_or(3 << 20, |a| a.parse().expect("BYTES"));
    let shape = args.next().unwrap_or_else(|| "env-vars".into());
    let body = std::process::Command::new("python3")
        .args(["benches/request_memory.py", "--print-body", &shape, "--bytes", &bytes.to_string()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("python3 benches/request_memory.py");
    assert!(body.status.success(), "{}", String::from_utf8_lossy(&body.stderr));
    let mut body = body.stdout;
    // `serve` reserves the declared length: no slack to count.
    body.shrink_to_fit();
    let (snapshot, _) =
        load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster")).expect("cluster");
    let _ = snapshot.sidecarset_index();
    let webhook = webhooks::by_path("/mutate-pod").expect("registered");
    let (settings, answers) = (Default::default(), Answers::default());
    let inputs = Inputs {
        cluster: &snapshot,
        answers: &answers,
        clock: &SystemClock,
        random: &ThreadRandom,
        settings: &settings,
    };

    let len = body.len() as f64;
    let base = live() - body.len();
    let row = |stage: &str, peak: usize| {
        let (l, p) = ((live() - base) as f64, (peak - base) as f64);
        println!(
            "| {stage} | {:.1} MiB ({:.2}×) | {:.1} MiB ({:.2}×) |",
            l / 1048576.0,
            l / len,
            p / 1048576.0,
            p / len
        );
    };
    println!(
        "{shape}, body {:.2} MiB; heap over what was live before the body, × = per body byte",
        len / 1048576.0
    );
    println!("| stage | live after | peak during |");
    println!("|---|---:|---:|");
    row("body", live());
    reset_peak();
    let cost = review_cost(&body);
    row("cost scan", peak());
    reset_peak();
    let request = decode_review_body(&body, cost.parts()).expect("JSON").expect("review");
    row("decode (body still held)", peak());
    drop(body);
    row("body dropped", live());
    reset_peak();
    let decision = webhooks::decide(webhook, &request, &inputs);
    row("decide", peak());
    reset_peak();
    let answer = review::review_response(request.version, &request.uid, &decision);
    row("answer", peak());
    println!(
        "charged by review_cost: {:.1} MiB decoded ({:.2}×); patch operations: {}, answer {} bytes",
        cost.decoded as f64 / 1048576.0,
        cost.decoded as f64 / len,
        decision.patch.len(),
        answer.len()
    );
}
