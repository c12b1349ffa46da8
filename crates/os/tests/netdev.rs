//! `bulkhead_os::netdev`: an interface moved into a namespace of its own is gone from
//! the machine's namespace, up inside its own, and back (with its former state) after the
//! drop, or after its owner's SIGKILL once `restore_stale` ran. This kernel has no CAN, so
//! the interface is one end of a veth pair (moved the same way). Root; skips where veth
//! pairs cannot be made.

use bulkhead_os::netdev::{IsolatedInterface, NETNS_DIR};
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};

/// A veth pair that is deleted when dropped (wherever its ends are by then).
struct Veth {
    a: String,
}

impl Veth {
    fn create(tag: &str) -> Option<Veth> {
        let a = format!("bh{}{tag}", std::process::id() % 100_000);
        let ok = Command::new("ip")
            .args([
                "link",
                "add",
                &a,
                "type",
                "veth",
                "peer",
                "name",
                &format!("{a}p"),
            ])
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Veth { a })
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", &self.a])
            .stderr(Stdio::null())
            .status();
    }
}

/// `ip -o link show IFACE` in this namespace, or `None` if it is not there.
fn show(iface: &str) -> Option<String> {
    let out = Command::new("ip")
        .args(["-o", "link", "show", iface])
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip -o link show IFACE` run inside the namespace `ns`.
fn show_in(ns: i32, iface: &str) -> String {
    let mut cmd = Command::new("ip");
    cmd.args(["-o", "link", "show", iface]);
    // SAFETY: only setns, async-signal-safe, between fork and exec; `ns` stays open.
    unsafe {
        cmd.pre_exec(move || match libc::setns(ns, libc::CLONE_NEWNET) {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        })
    };
    let out = cmd.output().expect("ip");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn is_up(line: &str) -> bool {
    line.contains(",UP") || line.contains("<UP")
}

fn set(iface: &str, state: &str) {
    assert!(Command::new("ip")
        .args(["link", "set", iface, state])
        .status()
        .unwrap()
        .success());
}

fn pins_of(pid: u32) -> Vec<String> {
    std::fs::read_dir(NETNS_DIR)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{pid}-")))
        .collect()
}

/// A veth pair. The tests that call it are ignored without root; as root, a kernel that
/// cannot make one (no veth module) fails them: it could not isolate interfaces either.
fn root_with_veth(tag: &str) -> Veth {
    Veth::create(tag).expect("needs root and veth pairs: `ip link add ... type veth` failed")
}

#[test]
#[ignore = "needs root: veth pairs and network namespaces"]
fn the_interface_leaves_this_namespace_and_comes_back_as_it_was() {
    let veth = root_with_veth("t");
    let a = veth.a.clone();
    for was_up in [true, false] {
        set(&a, if was_up { "up" } else { "down" });
        let iso = IsolatedInterface::take(&a).expect("take");
        assert_eq!(
            show(&a),
            None,
            "`{a}` still visible in the machine's namespace"
        );
        let inside = show_in(iso.netns(), &a);
        assert!(inside.contains(&a) && is_up(&inside), "inside: {inside}");
        assert_eq!(pins_of(std::process::id()).len(), 2, "pin and record");
        drop(iso);
        let back = show(&a).expect("back in the machine's namespace");
        assert_eq!(is_up(&back), was_up, "{back}");
        assert!(pins_of(std::process::id()).is_empty());
    }
    let e = IsolatedInterface::take("bhnosuchif0")
        .unwrap_err()
        .to_string();
    assert!(e.contains("interface `bhnosuchif0`"), "{e}");
}

/// Runs only as the child of `a_killed_owners_interface_is_moved_back_by_restore_stale`.
#[test]
#[ignore = "the child process of another test, run by it"]
fn isolating_child() {
    let Some(iface) = std::env::var_os("BULKHEAD_NETDEV_CHILD") else {
        return;
    };
    let iso = IsolatedInterface::take(iface.to_str().unwrap()).expect("take");
    println!("taken {}", iso.iface());
    std::thread::sleep(std::time::Duration::from_secs(30));
}

#[test]
#[ignore = "needs root: veth pairs and network namespaces"]
fn a_killed_owners_interface_is_moved_back_by_restore_stale() {
    let veth = root_with_veth("k");
    set(&veth.a, "up");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "isolating_child", "--ignored", "--nocapture"])
        .env("BULKHEAD_NETDEV_CHILD", &veth.a)
        .stdout(Stdio::piped())
        .spawn()
        .expect("child test");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let taken = lines.find(|l| l.as_ref().is_ok_and(|l| l.starts_with("taken ")));
    let pid = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(taken.is_some(), "the child did not take the interface");
    assert_eq!(
        show(&veth.a),
        None,
        "SIGKILL should leave it in the pinned namespace"
    );
    let report = IsolatedInterface::restore_stale();
    assert!(
        report
            .iter()
            .any(|l| l.contains(&format!("`{}` back", veth.a))),
        "{report:?}"
    );
    let back = show(&veth.a).expect("moved back");
    assert!(is_up(&back), "{back}");
    assert!(pins_of(pid).is_empty(), "{:?}", pins_of(pid));
}
