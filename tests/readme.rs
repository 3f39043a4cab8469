//! The README cannot drift from the binary: its ```console examples run against the built
//! `kruise-admission` from the repository root and must print what they show (`...` on its own
//! line and `[..]` in a line elide output; see the trycmd crate), and every flag `serve` accepts
//! is in its flag table.

#[test]
fn readme_console_examples_print_what_they_show() {
    trycmd::TestCases::new()
        .register_bin("kruise-admission", trycmd::cargo::cargo_bin!("kruise-admission"))
        .case("README.md");
}

#[test]
fn every_serve_flag_is_in_the_readmes_flag_table() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md");
    // The first column of the rows of the table under `| Flag | Default | Meaning |`.
    let table = readme.split("| Flag | Default | Meaning |").nth(1).expect("the serve flag table");
    let flags: String = table
        .lines()
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .filter_map(|row| row.split('|').nth(1))
        .collect();
    let serve =
        <kruise_admission::cli::serve::ServeArgs as clap::Args>::augment_args(clap::Command::new("serve"));
    let missing: Vec<String> = serve
        .get_arguments()
        .filter_map(|a| a.get_long())
        .filter(|long| {
            *long != "help"
                && !flags.contains(&format!("`--{long}`"))
                && !flags.contains(&format!("`--{long} "))
        })
        .map(|long| format!("--{long}"))
        .collect();
    assert!(missing.is_empty(), "serve flags missing from the README's flag table: {missing:?}");
}

/// The README's code map names every top-level module of `src/`, and every file or folder it names
/// in a module's row is there (a rename that forgets the map fails here).
#[test]
fn the_code_map_matches_the_tree() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let map = readme.split("## Code map").nth(1).expect("a Code map section");
    let map = map.split("\n## ").next().unwrap_or_default();
    let mut rows = std::collections::BTreeMap::new();
    for row in map.lines().filter(|l| l.starts_with("| `src/")) {
        let mut cells = row.split('|').skip(1);
        let module = cells.next().unwrap_or_default().trim().trim_matches('`').to_owned();
        rows.insert(module, cells.next().unwrap_or_default().to_owned());
    }
    let src = root.join("src");
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(&src).expect("src/").flatten() {
        if entry.path().is_dir() {
            let module = format!("src/{}/", entry.file_name().to_string_lossy());
            if !rows.contains_key(&module) {
                problems.push(format!("no row for {module}"));
            }
        }
    }
    for (module, text) in &rows {
        let dir = root.join(module);
        // Backticked names that look like paths: `build.rs`, `live/`, `server/mod.rs`.
        for name in text.split('`').skip(1).step_by(2) {
            let is_path = name.ends_with(".rs") || (name.ends_with('/') && !name.contains(' '));
            if is_path && !exists_below(&dir, name.trim_end_matches('/')) {
                problems.push(format!("{module} row names `{name}`, which is not under {module}"));
            }
        }
    }
    assert!(problems.is_empty(), "the README's code map and src/ disagree:\n{}", problems.join("\n"));
}

/// Is `name` (a file or folder, possibly with folders in front) somewhere under `dir`?
fn exists_below(dir: &std::path::Path, name: &str) -> bool {
    dir.join(name).exists()
        || std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().is_dir() && exists_below(&e.path(), name))
}
