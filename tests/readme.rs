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
