//! The manifest's promises. (The README as a user meets it, the package
//! installed in a fresh project, is `package-test.sh`, which `test.sh` runs.)

use std::process::Command;

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
