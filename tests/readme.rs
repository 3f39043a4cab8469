//! The docs cannot drift from the binary: the ```console examples of `README.md`, `CONTRIBUTING.md` and
//! `docs/*.md` run against the built `kruise-admission` from the repository root and must print what
//! they show (`...` on its own line and `[..]` in a line elide output; see the trycmd crate), every
//! flag `serve` accepts is in the flag table of `docs/cli.md`, the README's capability table names
//! exactly the paths the server routes, and the code map of `CONTRIBUTING.md` matches `src/`. Links and anchors are checked in `tests/doc_links.rs`.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The markdown files whose console examples are run: README.md, CONTRIBUTING.md, docs/*.md.
fn documents_with_examples() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("CONTRIBUTING.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| Path::new("docs").join(p.file_name().expect("a file name")))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

#[test]
fn console_examples_in_the_readme_and_docs_print_what_they_show() {
    let cases = trycmd::TestCases::new();
    cases.register_bin("kruise-admission", trycmd::cargo::cargo_bin!("kruise-admission"));
    for file in documents_with_examples() {
        // trycmd runs only the ```console (and ```trycmd) blocks of a markdown file; only files
        // with one are given to it.
        if has_console_block(&file) {
            cases.case(file);
        }
    }
}

/// Does the markdown file hold a ```console block (a line that opens one)?
fn has_console_block(file: &Path) -> bool {
    read(file.to_str().expect("a UTF-8 path")).lines().any(|l| l.trim_start().starts_with("```console"))
}

#[test]
fn the_docs_have_console_examples_to_run() {
    // A guard for the test above: moving the examples out of every file would make it pass vacuously.
    let with_examples: Vec<PathBuf> =
        documents_with_examples().into_iter().filter(|f| has_console_block(f)).collect();
    assert!(with_examples.contains(&PathBuf::from("README.md")), "README.md has no console example");
    assert!(with_examples.contains(&PathBuf::from("docs/cli.md")), "docs/cli.md has no console example");
}

#[test]
fn every_serve_flag_is_in_the_cli_references_flag_table() {
    let cli = read("docs/cli.md");
    // The first column of the rows of the table under `| Flag | Default | Meaning |`.
    let table =
        cli.split("| Flag | Default | Meaning |").nth(1).expect("the serve flag table in docs/cli.md");
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
    assert!(missing.is_empty(), "serve flags missing from the flag table of docs/cli.md: {missing:?}");
}

/// The code map of CONTRIBUTING.md names every top-level module of `src/`, and every file or folder it
/// names in a module's row is there (a rename that forgets the map fails here).
#[test]
fn the_code_map_matches_the_tree() {
    let contributing = read("CONTRIBUTING.md");
    let map = contributing.split("## Code map").nth(1).expect("a Code map section in CONTRIBUTING.md");
    let map = map.split("\n## ").next().unwrap_or_default();
    let mut rows = std::collections::BTreeMap::new();
    for row in map.lines().filter(|l| l.starts_with("| `src/")) {
        let mut cells = row.split('|').skip(1);
        let module = cells.next().unwrap_or_default().trim().trim_matches('`').to_owned();
        rows.insert(module, cells.next().unwrap_or_default().to_owned());
    }
    let src = root().join("src");
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
        let dir = root().join(module);
        // Backticked names that look like paths: `build.rs`, `live/`, `server/mod.rs`.
        for name in text.split('`').skip(1).step_by(2) {
            let is_path = name.ends_with(".rs") || (name.ends_with('/') && !name.contains(' '));
            if is_path && !exists_below(&dir, name.trim_end_matches('/')) {
                problems.push(format!("{module} row names `{name}`, which is not under {module}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the code map of CONTRIBUTING.md and src/ disagree:\n{}",
        problems.join("\n")
    );
}

/// Is `name` (a file or folder, possibly with folders in front) somewhere under `dir`?
fn exists_below(dir: &Path, name: &str) -> bool {
    dir.join(name).exists()
        || std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().is_dir() && exists_below(&e.path(), name))
}

/// Every metric the server registers (a `"kruise_admission_…"` name in `src/`) has a row in
/// docs/metrics.md.
#[test]
fn every_metric_is_in_the_metrics_reference() {
    let reference = read("docs/metrics.md");
    let mut names = std::collections::BTreeSet::new();
    collect_metric_names(&root().join("src"), &mut names);
    assert!(names.len() > 10, "found only {names:?} in src/");
    let missing: Vec<&String> = names.iter().filter(|n| !reference.contains(&format!("`{n}`"))).collect();
    assert!(missing.is_empty(), "metrics missing from docs/metrics.md: {missing:?}");
}

fn collect_metric_names(dir: &Path, names: &mut std::collections::BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_metric_names(&path, names);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("a source file");
            for piece in text.split("\"kruise_admission_").skip(1) {
                let name: String =
                    piece.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
                if piece[name.len()..].starts_with('"') && !name.is_empty() {
                    names.insert(format!("kruise_admission_{name}"));
                }
            }
        }
    }
}

/// The README's capability table claims only what is served: every path it names is a path of the
/// server's routing table (`admission::webhooks::WEBHOOKS`), and every routed path is named there.
#[test]
fn the_readme_capability_table_names_exactly_the_served_paths() {
    let readme = read("README.md");
    let section = readme.split("\n## Capabilities").nth(1).expect("a Capabilities section in README.md");
    let section = section.split("\n## ").next().unwrap_or_default();
    let named: std::collections::BTreeSet<&str> = section
        .lines()
        .filter(|l| l.starts_with('|'))
        .flat_map(|row| row.split('`').skip(1).step_by(2))
        .filter(|code| code.starts_with('/'))
        .collect();
    let served: std::collections::BTreeSet<&str> =
        kruise_admission::admission::webhooks::WEBHOOKS.iter().map(|w| w.path).collect();
    let not_served: Vec<&&str> = named.difference(&served).collect();
    assert!(
        not_served.is_empty(),
        "README.md's capability table names paths the server does not serve: {not_served:?}"
    );
    let unnamed: Vec<&&str> = served.difference(&named).collect();
    assert!(unnamed.is_empty(), "README.md's capability table leaves out served paths: {unnamed:?}");
    // And the first screen counts them.
    let claim = format!("It takes over {} of Kruise's webhook paths", served.len());
    assert!(readme.contains(&claim), "README.md's first screen does not say \"{claim}\"");
}

/// The console examples paste into a shell and run: a command that goes on over `> ` lines ends
/// each of its lines but the last with ` \` (trycmd joins them, a shell needs the backslash).
#[test]
fn multi_line_console_commands_continue_with_a_backslash() {
    let mut problems = Vec::new();
    for file in documents_with_examples() {
        let text = read(file.to_str().expect("a UTF-8 path"));
        let lines: Vec<&str> = text.lines().collect();
        for (i, pair) in lines.windows(2).enumerate() {
            let continues = pair[1].starts_with("> ");
            let command = pair[0].starts_with("$ ") || pair[0].starts_with("> ");
            if continues && command && !pair[0].ends_with(" \\") {
                problems.push(format!("{}:{}: {}", file.display(), i + 1, pair[0]));
            }
        }
    }
    assert!(problems.is_empty(), "console lines continued without a backslash:\n{}", problems.join("\n"));
}

/// docs/cli.md has a section for every subcommand the binary's `--help` lists, and both its
/// `manifests` synopsis and the top-level `--help` name every kind `manifests` prints.
#[test]
fn the_cli_reference_and_the_help_name_every_subcommand_and_every_manifests_kind() {
    use clap::ValueEnum as _;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kruise-admission"))
        .arg("--help")
        .output()
        .expect("the binary runs");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let commands = help.split("Commands:\n").nth(1).expect("a Commands section in --help");
    let commands: Vec<&str> = commands
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 6, "{help}");
    let cli = read("docs/cli.md");
    let missing: Vec<&&str> = commands.iter().filter(|c| !cli.contains(&format!("\n## `{c}`"))).collect();
    assert!(missing.is_empty(), "subcommands without a section in docs/cli.md: {missing:?}");

    let kinds: Vec<String> = kruise_admission::cli::manifests::What::value_variants()
        .iter()
        .filter_map(|w| w.to_possible_value().map(|v| v.get_name().to_owned()))
        .collect();
    let synopsis = cli.lines().find(|l| l.starts_with("kruise-admission manifests <")).expect("the synopsis");
    let manifests_help =
        help.lines().find(|l| l.trim_start().starts_with("manifests")).expect("manifests in --help");
    for kind in &kinds {
        assert!(synopsis.contains(kind.as_str()), "{kind} is not in the synopsis of docs/cli.md: {synopsis}");
        assert!(manifests_help.contains(kind.as_str()), "{kind} is not in --help: {manifests_help}");
    }
}
