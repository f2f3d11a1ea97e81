//! The README as a user meets it: its example builds in a fresh project whose
//! dependencies are exactly the README's dependency block (no
//! `futures-util`: the crate's prelude must be enough), and that project,
//! built without the `test-util` feature, does not see the test-only
//! defects, nor, without the `rustls` feature, the TLS options. The project
//! lives in `target/readme-project` (its own target directory, so a second
//! run is incremental), with this crate's `Cargo.lock` to build the same
//! versions offline.

use std::path::Path;
use std::process::Command;

/// The fenced blocks whose info string starts with `lang`.
fn blocks(md: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in md.lines() {
        match (&mut cur, line.strip_prefix("```")) {
            (None, Some(info)) if info.split(',').next() == Some(lang) => {
                cur = Some(String::new());
            }
            (Some(_), Some("")) => out.push(cur.take().unwrap()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// `cargo check` of one binary of the project: its success, and what it said.
fn check(proj: &Path, bin: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO"))
        .args([
            "check",
            "--offline",
            "--quiet",
            "--message-format=short",
            "--bin",
            bin,
        ])
        .current_dir(proj)
        .env("CARGO_TARGET_DIR", proj.join("target"))
        .env("CARGO_TERM_COLOR", "never")
        .output()
        .expect("running cargo");
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.success(), said)
}

#[test]
fn the_readme_example_builds_with_exactly_the_readme_dependencies() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
    let deps = blocks(&readme, "toml")
        .into_iter()
        .find(|b| b.starts_with("[dependencies]"))
        .expect("a [dependencies] block in the README");
    let path = format!("path = {:?}", dir.display().to_string());
    assert!(deps.contains("path = \"clients/rust\""), "{deps}");
    let deps = deps.replace("path = \"clients/rust\"", &path);
    let example = blocks(&readme, "rust")
        .into_iter()
        .find(|b| b.contains("fn main()"))
        .expect("the README's example");

    let proj = dir.join("target/readme-project");
    std::fs::create_dir_all(proj.join("src/bin")).unwrap();
    let manifest = format!(
        "[package]\nname = \"readme-example\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n\
         [workspace]\n\n[profile.dev]\ndebug = 0\n\n{deps}"
    );
    let write = |rel: &str, text: &str| {
        let p = proj.join(rel);
        if std::fs::read_to_string(&p).ok().as_deref() != Some(text) {
            std::fs::write(&p, text).unwrap(); // unchanged files keep their mtime
        }
    };
    write("Cargo.toml", &manifest);
    std::fs::copy(dir.join("Cargo.lock"), proj.join("Cargo.lock")).unwrap();
    write("src/main.rs", &example);
    write(
        "src/bin/faults.rs",
        "use muster_client::Faults;\nfn main() {\n    let _ = Faults::default();\n}\n",
    );
    write(
        "src/bin/options_faults.rs",
        "fn main() {\n    let _ = muster_client::ObserveOptions::default().faults(Default::default());\n}\n",
    );
    write(
        "src/bin/ca_file.rs",
        "fn main() {\n    let _ = muster_client::Client::builder(\"https://b1\").ca_file(\"ca.pem\");\n}\n",
    );

    let (ok, said) = check(&proj, "readme-example");
    assert!(
        ok,
        "the README example does not build with the README's dependencies:\n{said}"
    );

    // Without the `test-util` feature the deliberate defects are not API.
    let (ok, said) = check(&proj, "faults");
    assert!(!ok && said.contains("E0432"), "Faults is public:\n{said}");
    let (ok, said) = check(&proj, "options_faults");
    assert!(
        !ok && said.contains("E0599"),
        "ObserveOptions::faults is public:\n{said}"
    );

    // Without the `rustls` feature there is no TLS option to misconfigure:
    // `ca_file` (and `identity`) do not exist.
    let (ok, said) = check(&proj, "ca_file");
    assert!(
        !ok && said.contains("E0599"),
        "ClientBuilder::ca_file exists without rustls:\n{said}"
    );
}

/// `rust-version` is declared, and no lower than what the locked
/// dependencies declare (for this platform), so the MSRV a user reads is one
/// the crate builds with.
#[test]
fn rust_version_is_declared_and_covers_the_dependencies() {
    fn parse(v: &str) -> Vec<u32> {
        let mut n: Vec<u32> = v.split('.').map(|p| p.parse().unwrap_or(0)).collect();
        n.resize(3, 0); // 1.88 is 1.88.0
        n
    }
    let ours = env!("CARGO_PKG_RUST_VERSION");
    assert!(!ours.is_empty(), "no rust-version in Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--offline", "--format-version=1"])
        .args(["--filter-platform", "x86_64-unknown-linux-gnu"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("running cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for p in meta["packages"].as_array().unwrap() {
        if let Some(v) = p["rust_version"].as_str() {
            assert!(
                parse(v) <= parse(ours),
                "{} {} needs Rust {v}, rust-version says {ours}",
                p["name"],
                p["version"]
            );
        }
    }
}
