//! `bulkhead-app dashboard`: the instrument cluster, the infotainment's HVAC controls
//! and a system monitor in the browser (DriveOS 6.2's IC and IVI, as web pages).
//!
//! A best-effort program with three sources, none of which the rt side ever waits on:
//!
//! * the IVI read mapper's dashboard channel (a `latest` channel of [`Cluster`]
//!   messages: Simpson's four slots, wait-free for both sides), read every 2 ms;
//! * the supervisor's read-only status connection (`BULKHEAD_STATUS=fd:N`, a
//!   partition with `monitor: true`), asked for `status` every 100 ms;
//! * the browser's HVAC requests, written as [`Hvac`] commands into channel 2
//!   (`hvac_control`, a fifo the rt write mapper empties) without blocking: a full
//!   channel is answered 503.
//!
//! The listening socket is the supervisor's (`BULKHEAD_LISTEN=fd:N`, a partition with
//! `listen`): bound in the host's network, it lets a browser on the machine in while the
//! partition's own network stays private. Run alone, the dashboard binds `--listen`.
//!
//! The HTTP server is std's `TcpListener` with a thread per connection: four routes
//! (the page, `/events`, `/hvac`, 404) do not need a framework, and a dependency-free
//! server keeps the best-effort binary small. `/events` sends server-sent events every
//! 25 ms (40 Hz: the event period is most of the frame-to-screen latency): the newest cluster reading (with the bus time of its newest frame,
//! from which the page computes frame-to-screen latency), the newest status reply as
//! the supervisor sent it, and the HVAC commands sent so far.

use crate::wire::{Cluster, Hvac, CLUSTER_SIZE};
use bulkhead_can::service::stop_on_signals;
use bulkhead_chan::{Channel, Sender};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PAGE: &str = include_str!("dashboard.html");

/// Interval between two server-sent events.
const EVENT_EVERY: Duration = Duration::from_millis(25);

/// What the threads share (the dashboard's own locks; nothing the rt side touches).
struct Shared {
    cluster: Mutex<Option<Cluster>>,
    /// The newest `status` reply line (JSON), if any.
    status: Mutex<Option<String>>,
    hvac: Mutex<Sender>,
    /// The seq of the last HVAC command written into channel 2.
    hvac_seq: AtomicU32,
    stop: &'static AtomicBool,
}

/// Serves the dashboard until SIGTERM/SIGINT: on the listening socket the supervisor
/// handed over (`BULKHEAD_LISTEN=fd:N`, a partition with `listen`), or else on `listen`
/// (default 127.0.0.1:8080), bound here. Both at once is an error: `--listen` would bind
/// in the partition's own network, which no browser reaches.
pub fn run(listen: Option<&str>, from: &str, to: &str) -> Result<(), String> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let open = |name: &str| Channel::open_env(name).map_err(|e| format!("channel {name}: {e}"));
    let mut rx = open(from)?
        .receiver()
        .map_err(|e| format!("channel {from}: {e}"))?;
    let mut tx = open(to)?
        .sender()
        .map_err(|e| format!("channel {to}: {e}"))?;
    tx.set_spin(0);
    let status = status_connection()?;
    let listener = listener(listen)?;
    listener.set_nonblocking(true).map_err(|e| e.to_string())?;
    let shared = Arc::new(Shared {
        cluster: Mutex::new(None),
        status: Mutex::new(None),
        hvac: Mutex::new(tx),
        hvac_seq: AtomicU32::new(0),
        stop,
    });
    let s = shared.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; CLUSTER_SIZE];
        while !s.stop.load(Relaxed) {
            if rx.try_read(&mut buf).is_ok() {
                *lock(&s.cluster) = Some(Cluster::decode(&buf));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    if let Some(conn) = status {
        let s = shared.clone();
        std::thread::spawn(move || poll_status(conn, &s));
    }
    println!(
        "dashboard: serving http://{}/",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    while !stop.load(Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let s = shared.clone();
                std::thread::spawn(move || serve(stream, &s));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The descriptor the supervisor handed over in `var` (`fd:N`), if any.
fn inherited(var: &str) -> Result<Option<OwnedFd>, String> {
    let Ok(value) = std::env::var(var) else {
        return Ok(None);
    };
    let fd: i32 = value
        .strip_prefix("fd:")
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 2)
        .ok_or_else(|| format!("{var}={value}: want fd:N"))?;
    // The descriptor must be open: fstat checks it before it is owned.
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat writes into `st`, a buffer of the right size; any fd number is safe.
    if unsafe { libc::fstat(fd, st.as_mut_ptr()) } != 0 {
        return Err(format!("{var}={value}: not an open descriptor"));
    }
    // SAFETY: the supervisor handed this descriptor to this process alone, for this use;
    // it is open (checked above) and nothing else in the process owns it.
    Ok(Some(unsafe { OwnedFd::from_raw_fd(fd) }))
}

/// The listening socket: the one handed over, or `listen` (or the default) bound here.
fn listener(listen: Option<&str>) -> Result<TcpListener, String> {
    match (inherited("BULKHEAD_LISTEN")?, listen) {
        (Some(_), Some(addr)) => Err(format!(
            "--listen {addr}: the partition has a listening socket of the supervisor's \
             (BULKHEAD_LISTEN, its `listen` key); --listen would bind in the partition's \
             own network"
        )),
        (Some(fd), None) => {
            let listener = TcpListener::from(fd);
            listener
                .local_addr()
                .map_err(|e| format!("BULKHEAD_LISTEN: not a TCP socket: {e}"))?;
            Ok(listener)
        }
        (None, addr) => {
            let addr = addr.unwrap_or("127.0.0.1:8080");
            TcpListener::bind(addr).map_err(|e| format!("--listen {addr}: {e}"))
        }
    }
}

/// The inherited read-only status connection, if the partition has one.
fn status_connection() -> Result<Option<UnixStream>, String> {
    let Some(owned) = inherited("BULKHEAD_STATUS")? else {
        return Ok(None);
    };
    let conn = UnixStream::from(owned);
    conn.set_read_timeout(Some(Duration::from_secs(2)))
        .map_err(|e| format!("BULKHEAD_STATUS: {e}"))?;
    Ok(Some(conn))
}

/// Asks for `status` every 100 ms and keeps the newest reply.
fn poll_status(conn: UnixStream, s: &Shared) {
    let Ok(mut writer) = conn.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(conn);
    let mut line = String::new();
    while !s.stop.load(Relaxed) {
        if writer.write_all(b"{\"request\":\"status\"}\n").is_err() {
            return;
        }
        line.clear();
        // The supervisor answers once its loop runs (after every task has started):
        // a timeout only means not yet; what was read so far stays in `line`.
        loop {
            match reader.read_line(&mut line) {
                Ok(0) => return,
                Ok(_) => break,
                Err(e) if is_timeout(&e) && !s.stop.load(Relaxed) => continue,
                Err(_) => return,
            }
        }
        *lock(&s.status) = Some(line.trim_end().to_string());
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// One HTTP/1.1 request (no keep-alive); the connection is closed after the reply.
fn serve(mut stream: TcpStream, s: &Shared) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Some((method, target)) = request_line(&mut stream) else {
        return;
    };
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let _ = match (method.as_str(), path) {
        ("GET", "/" | "/ic" | "/ivi" | "/monitor") => reply(&mut stream, 200, "text/html", PAGE),
        ("GET", "/events") => events(&mut stream, s),
        ("POST", "/hvac") => {
            let (code, body) = hvac(query, s);
            reply(&mut stream, code, "application/json", &body)
        }
        _ => reply(&mut stream, 404, "text/plain", "not found\n"),
    };
}

/// The method and target of the request; its headers are read and ignored.
fn request_line(stream: &mut TcpStream) -> Option<(String, String)> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 16 * 1024 || stream.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&head);
    let mut words = text.lines().next()?.split(' ');
    Some((words.next()?.to_string(), words.next()?.to_string()))
}

fn reply(stream: &mut TcpStream, code: u16, kind: &str, body: &str) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {kind}; charset=utf-8\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())
}

/// Server-sent events every [`EVENT_EVERY`] until the browser goes away.
fn events(stream: &mut TcpStream, s: &Shared) -> std::io::Result<()> {
    stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
    )?;
    let mut n = 0u64;
    while !s.stop.load(Relaxed) {
        n += 1;
        let event = format!("data: {}\n\n", snapshot(s, n));
        stream.write_all(event.as_bytes())?;
        std::thread::sleep(EVENT_EVERY);
    }
    Ok(())
}

/// A number for JSON (`null` if not finite).
fn num(x: f32) -> String {
    match x.is_finite() {
        true => format!("{x:.3}"),
        false => "null".into(),
    }
}

/// One event: the cluster reading, the status reply, the HVAC commands sent.
fn snapshot(s: &Shared, n: u64) -> String {
    let cluster = lock(&s.cluster).map_or("null".to_string(), |c| {
        let w = c.wheels.map(|v| num(v * 3.6));
        let h = c.hvac;
        format!(
            "{{\"t_ns\":{},\"frames\":{},\"speed_kmh\":{},\"wheels_kmh\":[{}],\"steer_deg\":{},\"gear\":{},\"gas\":{},\"brake\":{},\"brake_pressed\":{},\"hvac\":{{\"seq\":{},\"temp_c\":{},\"fan\":{},\"echoes\":{}}}}}",
            c.sensors.t_ns,
            c.sensors.frames,
            num(c.sensors.v_ego * 3.6),
            w.join(","),
            num(c.steer_deg),
            match c.gear { 255 => "null".to_string(), g => g.to_string() },
            num(c.sensors.gas),
            num(c.sensors.brake_pressure),
            c.sensors.brake_pressed,
            h.seq,
            num(h.temp_c),
            h.fan,
            c.hvac_echoes
        )
    });
    let status = lock(&s.status).clone().unwrap_or_else(|| "null".into());
    format!(
        "{{\"n\":{n},\"sent_ms\":{},\"hvac_sent\":{},\"cluster\":{cluster},\"status\":{status}}}",
        realtime_ms(),
        s.hvac_seq.load(Relaxed)
    )
}

fn realtime_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_millis() as u64)
}

/// `temp=T&fan=F`: one command into channel 2 (the write mapper checks the ranges).
fn hvac(query: &str, s: &Shared) -> (u16, String) {
    let get = |key: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
    };
    let temp = get("temp").and_then(|t| t.parse::<f32>().ok());
    let fan = get("fan").and_then(|f| f.parse::<u8>().ok());
    let (Some(temp_c), Some(fan)) = (temp, fan) else {
        return (400, "{\"error\":\"want temp=NUMBER&fan=0..255\"}".into());
    };
    let mut tx = lock(&s.hvac);
    let seq = s.hvac_seq.load(Relaxed) + 1;
    let cmd = Hvac { seq, temp_c, fan };
    match tx.try_write(&cmd.encode()) {
        Ok(()) => {
            s.hvac_seq.store(seq, Relaxed);
            (200, format!("{{\"seq\":{seq}}}"))
        }
        Err(e) => (503, format!("{{\"error\":\"hvac_control: {e}\"}}")),
    }
}
