//! `bulkhead-bridge probe` (what `bulkhead probe --zenoh` runs; docs/zenoh.md): the round
//! trip of a query to the echo every bridge answers ([`declare_echo`]), here declared by
//! a Zenoh session of this test listening on loopback; without an answer the probe
//! says so and exits 1 instead of waiting. Observed from outside: exit code and output.

use bulkhead_bridge::declare_echo;
use std::process::{Command, Output};
use zenoh::Wait;

fn probe(endpoint: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bulkhead-bridge"))
        .args(["probe", "--connect", endpoint, "--count", "5"])
        .output()
        .unwrap()
}

/// A loopback port no one listens on now.
fn free_port() -> u16 {
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    socket.local_addr().unwrap().port()
}

#[test]
fn the_probe_times_round_trips_to_a_bridges_echo() {
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let mut config = zenoh::Config::default();
    config.insert_json5("mode", r#""peer""#).unwrap();
    config
        .insert_json5("scouting/multicast/enabled", "false")
        .unwrap();
    let listen = format!(r#"["{endpoint}"]"#);
    config.insert_json5("listen/endpoints", &listen).unwrap();
    let session = zenoh::open(config).wait().unwrap();
    let _echo = declare_echo(&session, &format!("bh-test/{}/probe", std::process::id())).unwrap();
    let out = probe(&endpoint);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let want = format!("zenoh round trip to {endpoint}: min ");
    assert!(stdout.starts_with(&want), "{stdout}");
    assert!(stdout.contains("over 5 queries"), "{stdout}");
    session.close().wait().unwrap();
}

#[test]
fn a_probe_nobody_answers_fails_and_says_so() {
    let endpoint = format!("tcp/127.0.0.1:{}", free_port());
    let out = probe(&endpoint);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let want = format!("bulkhead-bridge: probe {endpoint}: no bridge answered within 5 s");
    assert!(stderr.contains(&want), "{stderr}");
}
