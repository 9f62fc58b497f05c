//! Helpers shared by the integration tests.

// Each test binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// Declares a test that needs root (network namespaces, veth pairs,
/// CAP_NET_RAW): in a build made as root (`build.rs` sets cfg
/// `netns_tests`, as in CI) it runs; in any other build the test runner
/// lists it as ignored, with that reason. The test itself checks for root
/// ([`netns::require_root`], which `Netns::new` calls), so a build made as
/// root but run by another user fails with a clear message.
#[allow(unused_macros)] // each test file uses its own part of the helpers
macro_rules! root_test {
    ($(#[$attr:meta])* fn $name:ident() $body:block) => {
        #[test]
        #[cfg_attr(
            not(netns_tests),
            ignore = "needs root: network namespaces, veth pairs, CAP_NET_RAW (runs in a build made as root, as CI does)"
        )]
        $(#[$attr])*
        fn $name() $body
    };
}

/// The `ngctl` binary of this build.
pub const NGCTL: &str = env!("CARGO_BIN_EXE_ngctl");

/// Runs `ngctl` with `args`.
pub fn ngctl(args: &[&str]) -> Output {
    Command::new(NGCTL).args(args).output().expect("ngctl runs")
}

/// A command's output as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `ngctl probe --transport sim --max-size <max_size> --publish --shm <seg>`
/// with `extra` added: a sim entry (peer "sim", transport "sim") in `seg`.
pub fn publish_sim(seg: &str, max_size: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "probe",
        "--transport",
        "sim",
        "--max-size",
        max_size,
        "--publish",
        "--shm",
        seg,
    ];
    args.extend(extra);
    ngctl(&args)
}

/// A path in the temporary directory, unique to this test process:
/// `<tmp>/<prefix>-<pid>-<name>`.
pub fn tmp_path(prefix: &str, name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{prefix}-{}-{name}", std::process::id()))
}

/// `ngctl probe --transport sim --model <model> --json`; callers add
/// their own arguments.
pub fn sim_probe(model: &str) -> Command {
    let mut cmd = Command::new(NGCTL);
    cmd.args(["probe", "--transport", "sim", "--model", model, "--json"]);
    cmd
}

/// `ngctl probe --transport sim --json --raw` with `args` added, saved to
/// [`tmp_path`]`(prefix, name)` (what `ngctl fit` and `ngctl plot` read).
pub fn saved_sim_probe(prefix: &str, name: &str, args: &[&str]) -> PathBuf {
    let path = tmp_path(prefix, name);
    let mut cmd = Command::new(NGCTL);
    cmd.args(["probe", "--transport", "sim", "--json", "--raw"])
        .args(args);
    std::fs::write(&path, stdout_of(&mut cmd)).unwrap();
    path
}

/// The export arguments of the export tests: `format` for `transport`
/// on communicators of `comm_sizes` ranks, messages to 4 MiB, γ 0.2 ns/B,
/// a 10 % margin, every other choice left to the exporter.
pub fn export_args(
    format: netgauged::export::Format,
    transport: &str,
    comm_sizes: &[u32],
) -> netgauged::export::ExportArgs {
    netgauged::export::ExportArgs {
        format,
        shm: None,
        peer: None,
        transport: Some(transport.into()),
        comm_sizes: comm_sizes.to_vec(),
        max_bytes: 4 << 20,
        gamma_ns_per_byte: 0.2,
        cores: 0,
        margin: 0.1,
        loggopsim_unit: netgauged::export::loggopsim::Unit::Auto,
        bytes: None,
        hosts: None,
        trials: Vec::new(),
    }
}

/// Runs `cmd`, asserts that it succeeded (its stderr as the message if
/// not) and returns its stdout.
pub fn stdout_of(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{:?}: {}",
        cmd,
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// [`stdout_of`], parsed as JSON and validated against
/// docs/ngctl.schema.json ([`cli_json`]).
pub fn json_of(cmd: &mut Command) -> serde_json::Value {
    cli_json(&stdout_of(cmd))
}

/// `ngctl dump --json --shm <shm>`, checked as [`json_of`] checks it.
pub fn dump_json(shm: &std::path::Path) -> serde_json::Value {
    json_of(
        Command::new(NGCTL)
            .args(["dump", "--json", "--shm"])
            .arg(shm),
    )
}

/// JSON that `ngctl` printed, parsed and validated against the schema of
/// every `ngctl` JSON document, docs/ngctl.schema.json: a document that
/// does not validate fails the test that printed it.
pub fn cli_json(stdout: &[u8]) -> serde_json::Value {
    let v: serde_json::Value = serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "ngctl printed no JSON ({e}): {}",
            String::from_utf8_lossy(stdout)
        )
    });
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ngctl.schema.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("the schema"))
            .expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    let errors: Vec<String> = validator
        .iter_errors(&v)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "ngctl's JSON does not follow docs/ngctl.schema.json: {errors:#?}"
    );
    v
}

pub mod daemon;
pub mod echo;
pub mod netns;
pub mod probe;
