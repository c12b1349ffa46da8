//! The library processes under `bulkhead run` link to cooperate with the window
//! scheduler: [`initialization_completed`] ends an `init: true` process's
//! initialization, [`completed`] yields the rest of the current window. Both block
//! until the scheduler runs the process again.
//!
//! It speaks the DEmOS protocol (DEmOS thesis 4.5, `lib/demos-sch.c`), so DEmOS
//! programs run unchanged: the scheduler passes `DEMOS_PARAMETERS=<completed
//! fd>,<continue fd>,<has init>`; a completion writes the 8-byte integer 1 to the
//! first fd and blocks reading 8 bytes from the second. (bulkhead passes one
//! socket as both fds.) The C ABI exports the DEmOS names (`demos_init`,
//! `demos_completed`, `demos_initialization_completed`) and `bulkhead_*`
//! equivalents; see `include/bulkhead/client.h`. They return 0, or -1 with `errno`
//! set (`ENOKEY`: not started by a scheduler; `EBADMSG`: malformed parameters).

use bulkhead_os::errno;
use bulkhead_os::fd::{read_raw, send_nonblocking, write_raw};
use std::ffi::c_int;
use std::sync::Mutex;

pub mod request;
pub mod stop_start;

/// Why a call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// `DEMOS_PARAMETERS` is not set: the process was not started by bulkhead (or DEmOS).
    NotScheduled,
    /// `DEMOS_PARAMETERS` is malformed.
    BadParameters,
    /// Reading or writing the channel failed (errno).
    Io(i32),
    /// `BULKHEAD_STOP_START` is not set: not a best-effort program of a run without
    /// windows ([`stop_start`]).
    NoStopStart,
    /// `BULKHEAD_STOP_START` does not name a stop-start notice page.
    BadNotice,
    /// DEmOS's `demos_initialization_completed` without a pending initialization (no
    /// `init: yes`, or it was already completed).
    NoInitialization,
    /// The supervisor refused a request from inside ([`request_mode`],
    /// [`request_suspend`]) with this errno (`EPERM`: the description does not allow it).
    Refused(i32),
}

impl Error {
    /// The errno value the C ABI reports.
    pub fn errno(self) -> i32 {
        match self {
            Error::NotScheduled | Error::NoStopStart => errno::ENOKEY,
            Error::BadParameters | Error::BadNotice => errno::EBADMSG,
            Error::NoInitialization => errno::EWOULDBLOCK,
            Error::Io(e) | Error::Refused(e) => e,
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::NotScheduled => {
                f.write_str("DEMOS_PARAMETERS is not set: not running under bulkhead run")
            }
            Error::BadParameters => {
                f.write_str("DEMOS_PARAMETERS is malformed (expected FD,FD,0|1)")
            }
            Error::NoStopStart => f.write_str(
                "BULKHEAD_STOP_START is not set: not a best-effort program of a bulkhead run without windows",
            ),
            Error::BadNotice => f.write_str(
                "BULKHEAD_STOP_START does not name a stop-start notice page (expected fd:N)",
            ),
            Error::NoInitialization => f.write_str(
                "no initialization is pending (the process has no `init: yes`, or completed it already)",
            ),
            Error::Io(e) => write!(
                f,
                "scheduler channel: {}",
                std::io::Error::from_raw_os_error(*e)
            ),
            Error::Refused(e) => write!(
                f,
                "bulkhead refused the request: {}",
                std::io::Error::from_raw_os_error(*e)
            ),
        }
    }
}

impl std::error::Error for Error {}

/// The parsed `DEMOS_PARAMETERS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parameters {
    pub completed_fd: i32,
    pub continue_fd: i32,
    pub init: bool,
}

/// Parses `FD,FD,INIT` (`INIT` 0 or 1; DEmOS's helper program accepts it missing).
pub fn parse_parameters(text: &str) -> Result<Parameters, Error> {
    let mut parts = text.trim().split(',');
    let mut fd = || {
        parts
            .next()
            .and_then(|p| p.trim().parse::<i32>().ok())
            .filter(|&f| f >= 0)
            .ok_or(Error::BadParameters)
    };
    let (completed_fd, continue_fd) = (fd()?, fd()?);
    let init = match parts.next().map(str::trim) {
        None | Some("") | Some("0") => false,
        Some(v) => v.parse::<i32>().map_err(|_| Error::BadParameters)? != 0,
    };
    Ok(Parameters {
        completed_fd,
        continue_fd,
        init,
    })
}

#[derive(Debug)]
struct State {
    params: Parameters,
    init_pending: bool,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn with_state<T>(f: impl FnOnce(&mut State) -> Result<T, Error>) -> Result<T, Error> {
    let mut guard = STATE.lock().unwrap_or_else(|e| e.into_inner());
    if guard.is_none() {
        let text = std::env::var("DEMOS_PARAMETERS").map_err(|_| Error::NotScheduled)?;
        let params = parse_parameters(&text)?;
        *guard = Some(State {
            params,
            init_pending: params.init,
        });
    }
    f(guard.as_mut().expect("set above"))
}

/// Reads the parameters (done automatically by the other calls).
pub fn init() -> Result<(), Error> {
    with_state(|_| Ok(()))
}

/// Whether this process has an initialization phase that has not ended yet.
pub fn initialization_pending() -> Result<bool, Error> {
    with_state(|s| Ok(s.init_pending))
}

/// Signals completion of the work of this window and blocks until the process is
/// scheduled again. During a pending initialization it does nothing (as DEmOS).
pub fn completed() -> Result<(), Error> {
    let params = with_state(|s| Ok((!s.init_pending).then_some(s.params)))?;
    match params {
        Some(p) => signal(p),
        None => Ok(()),
    }
}

/// Signals that initialization is over and blocks until the schedule runs the
/// process (for a process without `init: true` it acts like [`completed`]).
pub fn initialization_completed() -> Result<(), Error> {
    let params = with_state(|s| {
        s.init_pending = false;
        Ok(s.params)
    })?;
    signal(params)
}

/// DEmOS's `demos_initialization_completed` (its `lib/demos-sch.c`): ends a pending
/// initialization like [`initialization_completed`]; without one it does nothing and
/// fails with [`Error::NoInitialization`] (`EWOULDBLOCK`), the process going on running.
pub fn initialization_completed_if_pending() -> Result<(), Error> {
    let params = with_state(|s| match std::mem::take(&mut s.init_pending) {
        true => Ok(s.params),
        false => Err(Error::NoInitialization),
    })?;
    signal(params)
}

/// The variable `bulkhead run` sets where it reads heartbeats on the channel: the
/// processes of best-effort partitions in no window.
pub const HEARTBEAT_VAR: &str = "BULKHEAD_HEARTBEAT";

/// The heartbeat message on the channel (a completion is 1).
pub const HEARTBEAT: u64 = 2;

/// Feeds this process's watchdog (`health: {watchdog: ...}`, docs/health.md): writes
/// the heartbeat message on the channel without blocking. Where nothing reads
/// heartbeats (no [`HEARTBEAT_VAR`]: a windowed process, or not started by `bulkhead
/// run`) it does nothing; a full channel drops the beat (the next one counts the same).
pub fn heartbeat() -> Result<(), Error> {
    if std::env::var_os(HEARTBEAT_VAR).is_none() {
        return Ok(());
    }
    let fd = with_state(|s| Ok(s.params.completed_fd))?;
    let beat = HEARTBEAT.to_ne_bytes();
    match send_nonblocking(fd, &beat) {
        Ok(8) => Ok(()),
        Ok(_) => Err(Error::Io(errno::EIO)),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
        Err(e) => Err(Error::Io(errno::of(&e))),
    }
}

/// One request at a time on the channel: a reply belongs to the request before it.
static REQUESTS: Mutex<()> = Mutex::new(());

/// Asks the supervisor to switch the system to mode `name` (docs/modes.md, "Requests
/// from inside"); returns once the mode manager took the request (the switch then runs;
/// `mode_done` in the schedule log ends it). Errors: [`Error::Refused`] with `EPERM`
/// when `modes.requesters` does not allow this program's partition that mode, `EBUSY`
/// when a switch or a stop-start is under way or the last switch was less than the
/// agent period ago, `EINVAL` for a name too long or a switch the manager does not
/// make (no such transition, already in that mode); `ENOTCONN` where no supervisor
/// reads requests (not a process of a best-effort partition in no window of `bulkhead
/// run`).
pub fn request_mode(name: &str) -> Result<(), Error> {
    if name.is_empty() || name.len() > request::MAX_NAME {
        return Err(Error::Io(errno::EINVAL));
    }
    ask(&request::Want::Mode(name.to_string()))
}

/// Asks the supervisor to suspend the system (stop-start, docs/stop-start.md), as
/// [`request_mode`] does a mode (`EPERM` unless the partition's requester entry has
/// `suspend: true`).
pub fn request_suspend() -> Result<(), Error> {
    ask(&request::Want::Suspend)
}

/// Sends `want` on the channel and waits for the supervisor's reply.
fn ask(want: &request::Want) -> Result<(), Error> {
    if std::env::var_os(HEARTBEAT_VAR).is_none() {
        return Err(Error::Io(errno::ENOTCONN));
    }
    let params = with_state(|s| Ok(s.params))?;
    let _one = REQUESTS.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = request::encode(want);
    match write_raw(params.completed_fd, &bytes) {
        Ok(n) if n == bytes.len() => {}
        Ok(_) => return Err(Error::Io(errno::EIO)),
        Err(e) => return Err(Error::Io(errno::of(&e))),
    }
    let mut reply = [0u8; 8];
    loop {
        match read_raw(params.continue_fd, &mut reply) {
            Ok(8) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::Io(errno::of(&e))),
            Ok(_) => return Err(Error::Io(errno::EPIPE)),
        }
    }
    match u64::from_ne_bytes(reply) {
        0 => Ok(()),
        e => Err(Error::Refused(i32::try_from(e).unwrap_or(errno::EIO))),
    }
}

/// One round of the protocol: [`notify`], then [`wait`].
pub fn signal(params: Parameters) -> Result<(), Error> {
    notify(params)?;
    wait(params)
}

/// Writes the completion message (the 8-byte integer 1).
pub fn notify(params: Parameters) -> Result<(), Error> {
    match write_raw(params.completed_fd, &1u64.to_ne_bytes()) {
        Ok(8) => Ok(()),
        Ok(_) => Err(Error::Io(errno::EIO)),
        Err(e) => Err(Error::Io(errno::of(&e))),
    }
}

/// Blocks until the continue message (8 bytes) arrives.
pub fn wait(params: Parameters) -> Result<(), Error> {
    let mut buf = [0u8; 8];
    loop {
        match read_raw(params.continue_fd, &mut buf) {
            Ok(8) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(Error::Io(errno::of(&e))),
            Ok(_) => return Err(Error::Io(errno::EPIPE)),
        }
    }
}

fn c_result(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            errno::set(e.errno());
            -1
        }
    }
}

/// C: reads `DEMOS_PARAMETERS`. 0 or -1 with errno.
#[no_mangle]
pub extern "C" fn demos_init() -> c_int {
    c_result(init())
}

/// C: yields the rest of this window; blocks until scheduled again.
#[no_mangle]
pub extern "C" fn demos_completed() -> c_int {
    c_result(completed())
}

/// C: ends initialization; blocks until the schedule runs the process. Without a
/// pending initialization: -1 with `EWOULDBLOCK`, at once (DEmOS's semantics; see
/// [`initialization_completed_if_pending`]).
#[no_mangle]
pub extern "C" fn demos_initialization_completed() -> c_int {
    c_result(initialization_completed_if_pending())
}

/// C: same as `demos_init`.
#[no_mangle]
pub extern "C" fn bulkhead_init() -> c_int {
    c_result(init())
}

/// C: same as `demos_completed`.
#[no_mangle]
pub extern "C" fn bulkhead_completed() -> c_int {
    c_result(completed())
}

/// C: ends initialization; blocks until the schedule runs the process (for a process
/// without a pending initialization it acts like `bulkhead_completed`).
#[no_mangle]
pub extern "C" fn bulkhead_initialization_completed() -> c_int {
    c_result(initialization_completed())
}

/// C: feeds the watchdog ([`heartbeat`]). 0, or -1 with errno.
#[no_mangle]
pub extern "C" fn bulkhead_heartbeat() -> c_int {
    c_result(heartbeat())
}

/// C: asks for a switch to mode `name` ([`request_mode`]). 0, or -1 with errno
/// (`EPERM`: not allowed by the description).
///
/// # Safety
/// `name` is null or points to a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_request_mode(name: *const std::ffi::c_char) -> c_int {
    if name.is_null() {
        return c_result(Err(Error::Io(errno::EFAULT)));
    }
    // SAFETY: the caller guarantees a NUL-terminated string (checked non-null).
    let name = unsafe { std::ffi::CStr::from_ptr(name) };
    match name.to_str() {
        Ok(name) => c_result(request_mode(name)),
        Err(_) => c_result(Err(Error::Io(errno::EINVAL))),
    }
}

/// C: asks for a suspend of the system ([`request_suspend`]). 0, or -1 with errno.
#[no_mangle]
pub extern "C" fn bulkhead_request_suspend() -> c_int {
    c_result(request_suspend())
}

/// The C view of a stop-start event (`struct bulkhead_stop_start_event`).
#[repr(C)]
pub struct CStopStartEvent {
    /// 1: suspend requested (`at_ns` = the acknowledgement deadline); 2: resumed
    /// (`at_ns` = the resume instant).
    pub kind: u32,
    pub seq: u32,
    pub at_ns: u64,
    /// Total time the system has spent suspended (resumed events).
    pub suspended_ns: u64,
}

static STOP_START: std::sync::OnceLock<stop_start::StopStart> = std::sync::OnceLock::new();
static STOP_START_INIT: Mutex<()> = Mutex::new(());

/// Runs `f` on the process's notice page, mapped at the first call (a failed mapping is
/// tried again at the next call). The page is shared by the program's threads: a thread
/// waiting for an event does not hold up another's `fresh`.
fn with_stop_start<T>(
    f: impl FnOnce(&stop_start::StopStart) -> Result<T, Error>,
) -> Result<T, Error> {
    if let Some(s) = STOP_START.get() {
        return f(s);
    }
    let _guard = STOP_START_INIT.lock().unwrap_or_else(|e| e.into_inner());
    if STOP_START.get().is_none() {
        let _ = STOP_START.set(stop_start::StopStart::open()?);
    }
    f(STOP_START.get().expect("set above"))
}

fn c_value(r: Result<c_int, Error>) -> c_int {
    match r {
        Ok(v) => v,
        Err(e) => c_result(Err(e)),
    }
}

/// C: maps the stop-start notice page (`BULKHEAD_STOP_START`). 0, or -1 with errno
/// (`ENOKEY`: not a best-effort program of a run without windows).
#[no_mangle]
pub extern "C" fn bulkhead_stop_start_init() -> c_int {
    c_result(with_stop_start(|_| Ok(())))
}

/// C: the next stop-start event not reported yet, waiting at most `timeout_ns` for one
/// (0: do not wait; negative: forever). 1 with `*event` filled, 0 when none came, -1
/// with errno.
///
/// # Safety
/// `event` points to a writable `struct bulkhead_stop_start_event`.
#[no_mangle]
pub unsafe extern "C" fn bulkhead_stop_start_event(
    timeout_ns: i64,
    event: *mut CStopStartEvent,
) -> c_int {
    if event.is_null() {
        return c_result(Err(Error::Io(errno::EFAULT)));
    }
    let timeout = u64::try_from(timeout_ns)
        .ok()
        .map(std::time::Duration::from_nanos);
    let got = with_stop_start(|s| Ok(s.wait_event(timeout)));
    let c = match got {
        Ok(Some(stop_start::Event::Suspending { seq, deadline_ns })) => CStopStartEvent {
            kind: 1,
            seq,
            at_ns: deadline_ns,
            suspended_ns: 0,
        },
        Ok(Some(stop_start::Event::Resumed {
            seq,
            resumed_at_ns,
            suspended_ns,
        })) => CStopStartEvent {
            kind: 2,
            seq,
            at_ns: resumed_at_ns,
            suspended_ns,
        },
        Ok(None) => return 0,
        Err(e) => return c_result(Err(e)),
    };
    // SAFETY: the caller guarantees `event` points to a writable event (checked non-null).
    unsafe { event.write(c) };
    1
}

/// C: CLOCK_MONOTONIC instant of the latest resume (0: none, or not available).
#[no_mangle]
pub extern "C" fn bulkhead_stop_start_resumed_at_ns() -> u64 {
    with_stop_start(|s| Ok(s.resumed_at_ns())).unwrap_or(0)
}

/// C: bulkhead's system time (CLOCK_MONOTONIC minus the time suspended; plain
/// CLOCK_MONOTONIC when not available).
#[no_mangle]
pub extern "C" fn bulkhead_stop_start_system_time_ns() -> u64 {
    with_stop_start(|s| Ok(s.system_time_ns())).unwrap_or_else(|_| stop_start::monotonic_ns())
}

/// C: the stale/fresh rule for an input stamped `stamp_ns` on CLOCK_MONOTONIC: 1 fresh
/// (use it), 0 stale (stamped before the latest resume: drop it), -1 with errno.
#[no_mangle]
pub extern "C" fn bulkhead_stop_start_fresh(stamp_ns: u64) -> c_int {
    c_value(with_stop_start(|s| Ok(s.fresh(stamp_ns) as c_int)))
}

/// C: [`bulkhead_stop_start_fresh`] for a CAN frame from a gateway channel, stamped on
/// CLOCK_REALTIME.
#[no_mangle]
pub extern "C" fn bulkhead_stop_start_fresh_can(stamp_ns: u64) -> c_int {
    c_value(with_stop_start(|s| Ok(s.fresh_can(stamp_ns) as c_int)))
}

/// C: inputs found stale so far by the two calls above.
#[no_mangle]
pub extern "C" fn bulkhead_stop_start_stale_dropped() -> u64 {
    with_stop_start(|s| Ok(s.stale_dropped())).unwrap_or(0)
}

/// The helper programs (`demos-signal-completion`, `bulkhead-signal-completion`):
/// one protocol round; exit codes as DEmOS's: 100 no parameters, 101 malformed,
/// 1 write failed, 2 read failed.
pub fn signal_completion_main() -> std::process::ExitCode {
    let Ok(text) = std::env::var("DEMOS_PARAMETERS") else {
        return 100.into();
    };
    let Ok(params) = parse_parameters(&text) else {
        return 101.into();
    };
    if notify(params).is_err() {
        return 1.into();
    }
    match wait(params) {
        Ok(()) => 0.into(),
        Err(_) => 2.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;

    #[test]
    fn parses_demos_parameters() {
        assert_eq!(
            parse_parameters("5,6,1"),
            Ok(Parameters {
                completed_fd: 5,
                continue_fd: 6,
                init: true
            })
        );
        assert_eq!(
            parse_parameters("3,3,0"),
            Ok(Parameters {
                completed_fd: 3,
                continue_fd: 3,
                init: false
            })
        );
        assert_eq!(
            parse_parameters("3,4,"),
            Ok(Parameters {
                completed_fd: 3,
                continue_fd: 4,
                init: false
            })
        );
        for bad in ["", "3", "a,b,0", "3,-1,0", "3,3,x"] {
            assert_eq!(parse_parameters(bad), Err(Error::BadParameters), "{bad:?}");
        }
    }

    #[test]
    fn demos_initialization_completed_without_init_fails_at_once() {
        // The only test of this binary that reads DEMOS_PARAMETERS (the state is global).
        std::env::set_var("DEMOS_PARAMETERS", "3,3,0");
        assert_eq!(
            initialization_completed_if_pending(),
            Err(Error::NoInitialization)
        );
        assert_eq!(demos_initialization_completed(), -1);
        assert_eq!(
            std::io::Error::last_os_error().raw_os_error(),
            Some(errno::EWOULDBLOCK)
        );
    }

    #[test]
    fn one_round_over_a_socket() {
        let (ours, mut theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let scheduler = std::thread::spawn(move || {
            let mut buf = [0u8; 8];
            theirs.read_exact(&mut buf).unwrap();
            assert_eq!(u64::from_ne_bytes(buf), 1);
            theirs.write_all(&1u64.to_ne_bytes()).unwrap();
        });
        signal(Parameters {
            completed_fd: ours.as_raw_fd(),
            continue_fd: ours.as_raw_fd(),
            init: false,
        })
        .unwrap();
        scheduler.join().unwrap();
    }
}
