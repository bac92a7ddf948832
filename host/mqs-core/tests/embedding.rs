//! The embedding core stays free of what a debugger that embeds it never
//! uses: no command line, progress bars, HTTP client, signal handling or
//! unwinder among its dependencies (they live in the crates above it).

/// The dependency names of `[dependencies]` in this crate's manifest.
fn dependencies() -> Vec<String> {
    let manifest = include_str!("../Cargo.toml");
    let mut names = Vec::new();
    let mut inside = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if inside {
            if let Some((name, _)) = line.split_once('=') {
                let name = name.trim().trim_end_matches(".workspace");
                if !name.is_empty() && !name.starts_with('#') {
                    names.push(name.to_owned());
                }
            }
        }
    }
    names
}

#[test]
fn the_core_depends_on_no_ui_cli_network_or_unwinder_crate() {
    let deps = dependencies();
    assert!(deps.iter().any(|d| d == "mqs-abi"), "{deps:?}");
    for banned in ["clap", "indicatif", "ureq", "signal-hook", "framehop"] {
        assert!(
            !deps.iter().any(|d| d == banned),
            "mqs-core depends on {banned}: {deps:?}"
        );
    }
}
