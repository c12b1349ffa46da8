//! `listen`: the supervisor binds a partition's TCP address in the host's network and
//! hands over the listening socket (`BULKHEAD_LISTEN=fd:N`). Attacked from inside
//! through `bulkhead run`: the partition accepts on that socket, and nothing else of the
//! host's network is open to it (the host's loopback services, its abstract Unix
//! sockets such as a virtual CAN bus's, a route out, a listener of its own reachable
//! from the host, connecting out through the handed socket). The same probe with
//! `network: host` reaches all of them, which shows the attacks are real. Needs root.

mod common;
use common::{bulkhead, exclusive_cpus_lock, Scratch};
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr as UnixAddr, UnixListener};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// From inside the partition: what the handed socket is, each attack's outcome, then
/// accepts one connection on the handed socket and answers it. `@X@` are filled in.
const PROBE: &str = r#"
import errno, os, socket, time
out = []
def attempt(name, f):
    try:
        f()
        out.append(f"{name}=ok")
    except OSError as e:
        out.append(f"{name}=denied:{errno.errorcode.get(e.errno, e.errno)}")
fd = int(os.environ["BULKHEAD_LISTEN"].removeprefix("fd:"))
lst = socket.socket(fileno=fd)
out.append(f"handed={lst.getsockname()[0]}:{lst.getsockname()[1]}")
out.append(f"accepting={lst.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)}")
attempt("host_service", lambda: socket.create_connection(("127.0.0.1", @SERVICE@), timeout=2))
def abstract():
    u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    u.connect(b"\0@ABSTRACT@")
attempt("abstract_socket", abstract)
def route_out():
    s = socket.socket()
    s.settimeout(1)
    s.connect(("198.51.100.1", 80))
attempt("route_out", route_out)
attempt("handed_connect", lambda: lst.connect(("127.0.0.1", @SERVICE@)))
attempt("handed_send", lambda: lst.send(b"x"))
own = socket.socket()
def own_listener():
    own.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    own.bind(("127.0.0.1", @OWN@))
    own.listen()
attempt("own_listener", own_listener)
open("@D@/report.tmp", "w").write("\n".join(out) + "\n")
os.rename("@D@/report.tmp", "@D@/report")
lst.settimeout(10)
conn, _ = lst.accept()
conn.sendall(b"hello from the partition\n")
conn.close()
time.sleep(30)
"#;

/// A free TCP port of the host's loopback (bound and released).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        // SAFETY: kill with a pid of our own child and a valid signal.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// The value after `name=` in a report.
fn value<'a>(report: &'a str, name: &str) -> &'a str {
    let prefix = format!("{name}=");
    let line = report.lines().find(|l| l.starts_with(&prefix));
    line.map_or("(missing)", |l| &l[prefix.len()..])
}

/// What the host saw: the handed socket's answer, and whether the partition's own
/// listener and the host's service were reached.
struct Seen {
    report: String,
    answer: String,
    own_reached: bool,
    /// The host's TCP service and its abstract Unix socket.
    service_reached: (bool, bool),
}

/// Runs the probe in a be partition with `listen` and `keys`, beside a TCP service and
/// an abstract Unix socket of the host's.
fn attack(dir: &Scratch, keys: &str) -> Seen {
    let service = TcpListener::bind("127.0.0.1:0").unwrap();
    service.set_nonblocking(true).unwrap();
    let name = format!("bulkhead-test-listen-{}", std::process::id());
    let abstract_socket =
        UnixListener::bind_addr(&UnixAddr::from_abstract_name(name.as_bytes()).unwrap()).unwrap();
    abstract_socket.set_nonblocking(true).unwrap();
    let handed = free_port();
    let own = std::iter::repeat_with(free_port)
        .find(|&p| p != handed)
        .unwrap();
    let d = dir.0.display().to_string();
    let probe = PROBE
        .replace(
            "@SERVICE@",
            &service.local_addr().unwrap().port().to_string(),
        )
        .replace("@ABSTRACT@", &name)
        .replace("@OWN@", &own.to_string())
        .replace("@D@", &d);
    std::fs::write(dir.file("probe.py"), probe).unwrap();
    let _ = std::fs::remove_file(dir.file("report"));
    let desc = dir.file("system.yaml");
    std::fs::write(
        &desc,
        format!("system: {{}}\npartitions:\n  - {{name: web, cpus: 1, listen: {handed}{keys}, processes: [\"/usr/bin/python3 {d}/probe.py\"]}}\n"),
    )
    .unwrap();
    let output = std::fs::File::create(dir.file("run.out")).unwrap();
    let run = Running(
        bulkhead()
            .args(["run", desc.to_str().unwrap(), "--timeout", "20s"])
            .stdout(Stdio::from(output.try_clone().unwrap()))
            .stderr(Stdio::from(output))
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(15);
    let report = loop {
        if let Ok(r) = std::fs::read_to_string(dir.file("report")) {
            break r;
        }
        let said = || std::fs::read_to_string(dir.file("run.out")).unwrap_or_default();
        assert!(
            Instant::now() < deadline,
            "the probe never reported:\n{}",
            said()
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut answer = String::new();
    if let Ok(mut c) = TcpStream::connect(("127.0.0.1", handed)) {
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = c.read_to_string(&mut answer);
    }
    let own_reached = TcpStream::connect(("127.0.0.1", own)).is_ok();
    let reached =
        |r: std::io::Result<()>| !matches!(r, Err(e) if e.kind() == ErrorKind::WouldBlock);
    let service_reached = (
        reached(service.accept().map(drop)),
        reached(abstract_socket.accept().map(drop)),
    );
    drop(run);
    Seen {
        report,
        answer,
        own_reached,
        service_reached,
    }
}

#[test]
#[ignore = "needs root: users, cgroups and namespaces"]
fn a_listening_partition_accepts_on_its_socket_and_reaches_nothing_else_of_the_host() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-listen");

    let seen = attack(&dir, "");
    let r = &seen.report;
    assert!(value(r, "handed").starts_with("127.0.0.1:"), "{r}");
    assert_eq!(value(r, "accepting"), "1", "a listening socket: {r}");
    assert_eq!(seen.answer, "hello from the partition\n", "{r}");
    for attack in ["host_service", "abstract_socket", "route_out"] {
        assert!(value(r, attack).starts_with("denied:"), "{attack}: {r}");
    }
    assert_eq!(value(r, "route_out"), "denied:ENETUNREACH", "no route: {r}");
    assert_eq!(value(r, "handed_connect"), "denied:EISCONN", "{r}");
    assert_eq!(value(r, "handed_send"), "denied:EPIPE", "{r}");
    assert_eq!(value(r, "own_listener"), "ok", "{r}");
    assert!(
        !seen.own_reached,
        "its own listener is in its own network: {r}"
    );
    assert_eq!(seen.service_reached, (false, false), "{r}");

    // The same partition in the host's network reaches all of it.
    let seen = attack(&dir, ", network: host");
    let r = &seen.report;
    assert_eq!(seen.answer, "hello from the partition\n", "{r}");
    assert_eq!(value(r, "host_service"), "ok", "{r}");
    assert_eq!(value(r, "abstract_socket"), "ok", "{r}");
    assert!(seen.own_reached, "{r}");
    assert_eq!(seen.service_reached, (true, true), "{r}");
}

#[test]
#[ignore = "needs root: bulkhead run"]
fn an_address_that_cannot_be_bound_stops_the_run_naming_the_key() {
    let _lock = exclusive_cpus_lock();
    let dir = Scratch::new("sec-listen-busy");
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let desc = dir.file("system.yaml");
    std::fs::write(
        &desc,
        format!("system: {{}}\npartitions:\n  - {{name: web, cpus: 1, listen: {port}, processes: [\"sleep 30\"]}}\n"),
    )
    .unwrap();
    let out = bulkhead()
        .args(["run", desc.to_str().unwrap(), "--timeout", "20s"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let want =
        format!("partition `web` (partitions[0].listen `127.0.0.1:{port}`): cannot listen: ");
    assert!(
        stderr.contains(&want) && stderr.contains("in use"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}
