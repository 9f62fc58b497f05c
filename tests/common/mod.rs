//! Helpers shared by the CLI tests.

use std::process::Command;

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

/// [`stdout_of`], parsed as JSON.
pub fn json_of(cmd: &mut Command) -> serde_json::Value {
    serde_json::from_slice(&stdout_of(cmd)).expect("JSON on stdout")
}

pub mod echo;
pub mod netns;
pub mod probe;
