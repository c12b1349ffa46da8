//! `bulkhead-app plant`: the vehicle plant (DriveOS's CARLA) or the HIL replay, a
//! best-effort process.

use super::{finite, R};
use crate::car::{self, ACC_CONTROL};
use crate::delay::Delays;
use crate::plant::{Car, Plant};
use crate::wire::{HVAC_COMMAND_ID, HVAC_STATUS_ID};
use bulkhead_can::frame::{CanId, Frame};
use bulkhead_can::service::stop_on_signals;
use bulkhead_can::vbus::{Bus, Node};
use bulkhead_task::clock::{now_ns, sleep_until};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::time::Duration;

#[derive(clap::Args)]
pub struct Args {
    /// The virtual bus it serves
    #[arg(long, value_name = "BUS", default_value = "car")]
    bus: String,
    /// The speed at the start, km/h
    #[arg(long, value_name = "KMH", value_parser = finite, default_value = "72")]
    v0: f64,
    /// The road's grade, %
    #[arg(long, value_name = "PCT", value_parser = finite, default_value = "0")]
    grade: f64,
    /// Also writes what it prints every 0.5 s to this file
    #[arg(long, value_name = "FILE")]
    report: Option<String>,
    /// SPEED's rate, 1 to 1000 Hz (0: the car's 41.45 Hz)
    #[arg(long, value_name = "HZ", value_parser = speed_hz, default_value = "0")]
    speed_hz: f64,
    /// Writes every pipeline delay (ns, one a line) to this file
    #[arg(long, value_name = "FILE")]
    delays: Option<String>,
    /// Replays this candump log onto the bus instead of simulating the car
    #[arg(long, value_name = "LOG")]
    replay: Option<String>,
    /// The log's interface that is replayed
    #[arg(long, value_name = "IFACE", default_value = "can0")]
    iface: String,
    /// How many times the log is replayed (0: until the stop)
    #[arg(long, value_name = "N", default_value = "1")]
    loops: u64,
}

/// `--speed-hz`: 0, or 1 to 1000 Hz (the plant steps every 1 ms).
fn speed_hz(text: &str) -> R<f64> {
    match finite(text)? {
        hz if hz == 0.0 || (1.0..=1000.0).contains(&hz) => Ok(hz),
        _ => Err("1 to 1000 (0: the car's rate)".to_string()),
    }
}

/// Creates the file of flag `flag` if it was given.
fn create(flag: &str, path: Option<&str>) -> R<Option<std::fs::File>> {
    match path {
        Some(path) => std::fs::File::create(path)
            .map(Some)
            .map_err(|e| format!("{flag} {path}: {e}")),
        None => Ok(None),
    }
}

/// The vehicle plant: serves the virtual bus, publishes the car's messages at their
/// real rates, applies the ACC_CONTROL commands it receives (DriveOS's CARLA).
pub fn run(args: &Args) -> R<()> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let name = &args.bus;
    let _bus = Bus::bind(name, 500_000)
        .map_err(|e| format!("bus {name}: {e}"))?
        .spawn();
    if let Some(log) = &args.replay {
        let loops = Some(args.loops).filter(|&n| n != 0);
        return replay(name, log, &args.iface, loops, stop);
    }
    let mut node = Node::attach(name).map_err(|e| format!("bus {name}: {e}"))?;
    let car = Car {
        grade_rad: (args.grade / 100.0).atan(),
        ..Car::default()
    };
    let mut p = Plant::new(car, args.v0 / 3.6);
    let report = create("--report", args.report.as_deref())?;
    let mut delay_log = create("--delays", args.delays.as_deref())?.map(std::io::BufWriter::new);
    let periods = periods(args.speed_hz);
    let db = car::dbc();
    let dt_ns = 1_000_000u64;
    let start = now_ns();
    let mut due = [0u64; 4];
    let (mut a_cmd, mut commands, mut sent) = (0.0f64, 0u64, 0u64);
    let mut next_print = 0u64;
    let (mut k, mut tag, mut delays, mut logged) = (0u64, 0u8, Delays::default(), 0);
    while !stop.load(Relaxed) {
        k += 1;
        sleep_until(start + k * dt_ns);
        commands += answer(&mut node, &db, &mut a_cmd, &mut delays)?;
        p.step(a_cmd, 1e-3);
        let t_us = k * 1000;
        for (i, (message, period)) in periods.iter().enumerate() {
            if t_us >= due[i] {
                due[i] += period;
                if *message == "SPEED" {
                    tag = delays.send(realtime_ns());
                }
                node.send(&frame(&db, message, &p, tag))
                    .map_err(|e| e.to_string())?;
                sent += 1;
            }
        }
        if t_us >= next_print {
            next_print += 500_000;
            let line = format!(
                "plant t={:.2}s v={:.2}km/h accel_cmd={:+.3} a={:+.3} frames_sent={sent} commands={commands}",
                t_us as f64 / 1e6,
                p.v * 3.6,
                a_cmd,
                p.a
            );
            println!("{line}");
            if next_print % 5_000_000 == 0 {
                println!("plant: {}", delays.summary());
            }
            if let Some(f) = delay_log.as_mut() {
                log_delays(f, &delays.delays[logged..]).map_err(|e| format!("--delays: {e}"))?;
                logged = delays.delays.len();
            }
            if let Some(mut f) = report.as_ref() {
                use std::io::Write;
                let _ = writeln!(f, "{line}");
            }
        }
    }
    println!(
        "plant: stopped: v={:.2}km/h frames_sent={sent} commands={commands}",
        p.v * 3.6
    );
    println!("plant: {}", delays.summary());
    if let Some(f) = delay_log.as_mut() {
        log_delays(f, &delays.delays[logged..]).map_err(|e| format!("--delays: {e}"))?;
    }
    Ok(())
}

/// Takes the frames the plant received: answers an HVAC command with its status, and
/// applies an ACC_CONTROL command (`a_cmd`, its tag answered in `delays`); how many
/// commands it applied.
fn answer(
    node: &mut Node,
    db: &bulkhead_can::dbc::Database,
    a_cmd: &mut f64,
    delays: &mut Delays,
) -> R<u64> {
    let hvac_command = CanId::standard(HVAC_COMMAND_ID).expect("11 bits");
    let hvac_status = CanId::standard(HVAC_STATUS_ID).expect("11 bits");
    let mut commands = 0;
    while let Some(r) = node.try_recv().map_err(|e| e.to_string())? {
        if r.frame.id() == hvac_command {
            // The HVAC unit takes the setting and reports it.
            let status = Frame::new(hvac_status, r.frame.data()).expect("same length");
            node.send(&status).map_err(|e| e.to_string())?;
        }
        if r.frame.id() == ACC_CONTROL {
            if let Ok(d) = db.decode(&r.frame) {
                let get = |n: &str| d.signals.iter().find(|s| s.0 == n).map(|s| s.1);
                if let Some(a) = get("ACCEL_CMD") {
                    *a_cmd = a;
                    commands += 1;
                }
                if let Some(t) = get("ITS_CONNECT_LEAD") {
                    delays.answered(t as u8, r.t_ns);
                }
            }
        }
    }
    Ok(commands)
}

/// The plant's messages and their periods (us): the real rates, with SPEED at
/// `speed_hz` instead unless it is 0 (see [`speed_hz`]).
fn periods(speed_hz: f64) -> [(&'static str, u64); 4] {
    let mut periods = car::PERIODS_US;
    if speed_hz != 0.0 {
        for p in periods.iter_mut().filter(|p| p.0 == "SPEED") {
            p.1 = (1e6 / speed_hz).round() as u64;
        }
    }
    periods
}

/// Appends `delays` (ns, one a line) to the `--delays` file and flushes it: `bulkhead
/// run` ends best-effort processes with SIGKILL, so what is flushed is what counts.
fn log_delays(f: &mut impl std::io::Write, delays: &[u64]) -> std::io::Result<()> {
    for d in delays {
        writeln!(f, "{d}")?;
    }
    f.flush()
}

/// HIL replay (DriveOS 6.1: the rig fed a real car's CAN trace to IC and IVI): the
/// log's frames of `iface` go onto the bus at real speed, `loops` times (`None`: until
/// the stop), from 0.5 s after the bus is served; the bus is served until the stop.
/// The ADAS side then runs open loop: nothing reads its commands.
fn replay(bus: &str, log: &str, iface: &str, loops: Option<u64>, stop: &AtomicBool) -> R<()> {
    let (bus, log, iface) = (bus.to_string(), log.to_string(), iface.to_string());
    // The replay runs on a thread of its own: a stop ends the program at once, even in
    // the middle of a loop (the thread goes with the process).
    let player = std::thread::spawn(move || play(&bus, &log, &iface, loops));
    while !stop.load(Relaxed) {
        if player.is_finished() {
            player
                .join()
                .map_err(|_| "the replay failed".to_string())??;
            while !stop.load(Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Plays `log`'s frames of `iface` onto `bus`, `loops` times (`None`: for ever).
fn play(bus: &str, log: &str, iface: &str, loops: Option<u64>) -> R<()> {
    use bulkhead_can::replay::{replay, Options};
    let node = Node::attach(bus).map_err(|e| format!("bus {bus}: {e}"))?;
    // usb-bh attaches within a few jobs once the bus exists (it begins at one job and
    // finishes at a later one); a node sees only frames sent after it attached, so the
    // log starts half a second later.
    std::thread::sleep(Duration::from_millis(500));
    let mut buses: Vec<Box<dyn bulkhead_can::bus::CanBus>> = vec![Box::new(node)];
    let path = std::path::Path::new(log);
    let mut open = || bulkhead_can::candump::open_log(path);
    let routes = [(Some(iface.to_string()), 0)];
    let options = Options {
        loops,
        ..Options::default()
    };
    let stats =
        replay(&mut open, &mut buses, &routes, &options).map_err(|e| format!("{log}: {e}"))?;
    println!(
        "plant: replayed {} frames of {iface} from {log} onto {bus} ({} of other interfaces skipped)",
        stats.sent, stats.skipped
    );
    Ok(())
}

/// CLOCK_REALTIME in ns: the clock of the virtual bus's timestamps.
fn realtime_ns() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_nanos() as u64)
}

/// The plant's frame of `message` (SPEED carries `tag` in ENCODER).
pub(super) fn frame(db: &bulkhead_can::dbc::Database, message: &str, p: &Plant, tag: u8) -> Frame {
    let kmh = p.v * 3.6;
    match message {
        "SPEED" => car::encode(db, "SPEED", &[("SPEED", kmh), ("ENCODER", f64::from(tag))]),
        "WHEEL_SPEEDS" => {
            let w = kmh.max(0.0);
            car::encode(
                db,
                "WHEEL_SPEEDS",
                &[
                    ("WHEEL_SPEED_FL", w),
                    ("WHEEL_SPEED_FR", w),
                    ("WHEEL_SPEED_RL", w),
                    ("WHEEL_SPEED_RR", w),
                ],
            )
        }
        "GAS_PEDAL" => car::encode(
            db,
            "GAS_PEDAL",
            &[("GAS_PEDAL", (p.gas_pct() * 2.0).round() / 2.0)],
        ),
        _ => car::encode(
            db,
            "BRAKE_MODULE",
            &[("BRAKE_PRESSURE", p.brake_pressure())],
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_speed_rate_can_be_raised_for_the_benchmark() {
        assert_eq!(periods(0.0), car::PERIODS_US);
        let fast = periods(speed_hz("500").unwrap());
        assert_eq!(fast[1], ("SPEED", 2_000));
        assert_eq!(fast[0], car::PERIODS_US[0]);
        for bad in ["2000", "0.5", "-1", "NaN"] {
            assert!(speed_hz(bad).is_err(), "{bad}");
        }
    }
}
