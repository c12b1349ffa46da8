//! The stand-ins for DEmOS's test programs (tests/demos/README.md) build from DEmOS's
//! header alone, in C and C++, and outside a scheduler fail as DEmOS's do.

#[path = "demos/compile.rs"]
mod compile;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// Builds the programs into a scratch directory beside the static library.
fn build(name: &str) -> compile::ProgramDir {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    // target/<profile>/deps/demos_programs-<hash> -> target/<profile>/libbulkhead_client.a
    let exe = std::env::current_exe().unwrap();
    let lib = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("libbulkhead_client.a");
    assert!(lib.exists(), "{} not built", lib.display());
    let dir = compile::ProgramDir::new(name);
    let sources = manifest.join("tests/demos");
    compile::build_all(&sources, &manifest.join("include"), &lib, &dir.0).unwrap();
    dir
}

#[test]
fn outside_a_scheduler_the_api_programs_fail_with_enokey() {
    let dir = build("outside");
    for program in ["api-test", "api-init-test"] {
        let out = Command::new(dir.0.join(program))
            .env_remove("DEMOS_PARAMETERS")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{program}: {stderr}");
        let enokey = std::io::Error::from_raw_os_error(bulkhead_os::errno::ENOKEY).to_string();
        // err(3)'s message: "PROGRAM: demos_init: <strerror>".
        let enokey = enokey.split(" (os error").next().unwrap();
        assert!(
            stderr.contains(&format!("demos_init: {enokey}")),
            "{program}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{program} printed before its init");
    }
}

#[test]
fn dummy_waits_until_it_is_killed() {
    let dir = build("dummy");
    let mut child = Command::new(dir.0.join("dummy"))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(child.try_wait().unwrap().is_none(), "dummy ended by itself");
    child.kill().unwrap();
    child.wait().unwrap();
}
