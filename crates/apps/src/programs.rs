//! The subcommands of `bulkhead-app` (see docs/vehicle.md for the data paths).

use crate::car::{self, ACC_CONTROL};
use crate::chanbus::{usb_step, ChanBus, UsbCounts};
use crate::delay::Delays;
use crate::longcontrol::Params;
use crate::plant::{Car, Plant};
use crate::scenario::{Planner, Series};
use crate::service::Controller;
use crate::wire::{
    Actuation, Cluster, Command, Hvac, InitRecord, Msg, Op, PlanState, Sensors, UpdateInput,
    UpdateOutput, HVAC_COMMAND_ID, HVAC_STATUS_ID, SIZE,
};
use bulkhead_can::frame::{CanId, Frame};
use bulkhead_can::gateway::{self, BusReader, BusWriter, Limit, Role, WriterLink, WIRE_SIZE};
use bulkhead_can::service::{parse_ids, stop_on_signals};
use bulkhead_can::vbus::{Bus, Node};
use bulkhead_chan::{Channel, Receiver, Sender};
use bulkhead_task::clock::{now_ns, sleep_until};
use bulkhead_task::{Activation, Counter, Task};
use std::collections::HashSet;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

type R<T> = Result<T, String>;

/// The programs, by subcommand.
pub const USAGE: &str = "usage: bulkhead-app PROGRAM [FLAGS]
rt tasks (started by bulkhead run):
  usb-bh [--bus car]                     the only node on the bus: bus <-> usb_rx/usb_tx
  mhydra-rx [--to CHANNEL]...            gateway reader: usb_rx -> each --to channel
  mhydra-tx [--from CHANNEL=IDS]...      gateway writer: each --from channel -> usb_tx, allowlisted
  ivi-read-mapper [--dash CHANNEL] | adas-read-mapper   gateway frames -> signals (channels 1, 3)
  ivi-write-mapper | adas-write-mapper   channel 2 HVAC / channel 4 commands -> gateway
  long-controller                        INIT/RESET/UPDATE over channels 5-8
  aml-read [--set KMH@S,...] [--lead KMH@S,... --lead-gap M]   K: channel 3 + plan -> UPDATEs (5-7)
  aml-write                              L: channel 8 -> channel 4
  probe                                  notes how late each job starts (the platform's floor)
be processes:
  openpilot | ivi-mapper | instrument-cluster
  dashboard [--listen 127.0.0.1:8080, or BULKHEAD_LISTEN's socket] [--from ic_dashboard] [--to hvac_control]
  plant [--bus car] [--v0 KMH] [--grade PCT] [--report FILE] [--speed-hz HZ] [--delays FILE]
        | plant --replay LOG [--iface can0] [--loops 1, 0: for ever]
  send-frame --to CHANNEL ID#DATA...     frames into a gateway channel (e.g. adas_raw_tx)";

/// Runs subcommand `args[0]`; the exit status.
pub fn main(args: &[String]) -> i32 {
    let Some(cmd) = args.first() else {
        eprintln!("{USAGE}");
        return 2;
    };
    let flags = Flags(args[1..].to_vec());
    if let Some(allowed) = flags_of(cmd) {
        if let Err(e) = flags.check(allowed, cmd == "send-frame") {
            say(format!("bulkhead-app {cmd}: error: {e}\n{USAGE}"));
            return 2;
        }
    }
    let result = match cmd.as_str() {
        "usb-bh" => usb_bh(&flags),
        "mhydra-rx" => mhydra_rx(&flags),
        "mhydra-tx" => mhydra_tx(&flags),
        "ivi-read-mapper" => read_mapper(&flags, "ivi_can_rx", "ic_ivi_sensor"),
        "dashboard" => crate::dashboard::run(
            flags.get("--listen").as_deref(),
            &flags.or("--from", "ic_dashboard"),
            &flags.or("--to", "hvac_control"),
        ),
        "adas-read-mapper" => read_mapper(&flags, "adas_can_rx", "carla_sensor"),
        "ivi-write-mapper" => ivi_write_mapper(&flags),
        "adas-write-mapper" => adas_write_mapper(&flags),
        "long-controller" => long_controller(),
        "probe" => probe(),
        "aml-read" => aml_read(&flags),
        "aml-write" => aml_write(),
        "openpilot" => openpilot(),
        "ivi-mapper" => ivi_mapper(),
        "instrument-cluster" => listen("instrument-cluster", CLUSTER_PORT),
        "plant" => plant(&flags),
        "send-frame" => send_frame(&flags),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            return 0;
        }
        other => {
            say(format!("bulkhead-app: unknown program `{other}`\n{USAGE}"));
            return 2;
        }
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            say(format!("bulkhead-app {cmd}: error: {e}"));
            1
        }
    }
}

/// One line on stderr in one write, so that the lines of processes sharing the
/// supervisor's stderr do not interleave.
fn say(line: String) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// The flags (each taking a value) program `cmd` accepts; None for an unknown program.
fn flags_of(cmd: &str) -> Option<&'static [&'static str]> {
    Some(match cmd {
        "usb-bh" => &["--bus"],
        "mhydra-rx" => &["--to"],
        "mhydra-tx" => &["--from"],
        "ivi-read-mapper" | "adas-read-mapper" => &["--from", "--to", "--dash"],
        "ivi-write-mapper" | "adas-write-mapper" => &["--from", "--to"],
        "dashboard" => &["--listen", "--from", "--to"],
        "aml-read" => &["--set", "--lead", "--lead-gap"],
        "plant" => &[
            "--bus",
            "--v0",
            "--grade",
            "--report",
            "--replay",
            "--iface",
            "--speed-hz",
            "--delays",
            "--loops",
        ],
        "send-frame" => &["--to"],
        "long-controller" | "probe" | "aml-write" | "openpilot" | "ivi-mapper"
        | "instrument-cluster" => &[],
        _ => return None,
    })
}

/// `--name value` (or `--name=value`) flags.
struct Flags(Vec<String>);

impl Flags {
    /// Every argument is one of `allowed` with its value (or, if `frames`, a frame
    /// `ID#DATA`).
    fn check(&self, allowed: &[&str], frames: bool) -> R<()> {
        let mut it = self.0.iter();
        while let Some(a) = it.next() {
            let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
            if frames && !a.starts_with("--") && a.contains('#') {
                continue;
            }
            if !allowed.contains(&name) {
                return Err(match allowed.is_empty() {
                    true => format!("{a}: this program takes no arguments"),
                    false => format!("{a}: unknown argument (takes {})", allowed.join(", ")),
                });
            }
            if !a.contains('=') && it.next().is_none() {
                return Err(format!("{a}: needs a value"));
            }
        }
        Ok(())
    }

    fn all(&self, name: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut it = self.0.iter();
        while let Some(a) = it.next() {
            if let Some(v) = a.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                out.push(v.to_string());
            } else if a == name {
                out.extend(it.next().cloned());
            }
        }
        out
    }
    fn get(&self, name: &str) -> Option<String> {
        self.all(name).pop()
    }
    fn or(&self, name: &str, default: &str) -> String {
        self.get(name).unwrap_or_else(|| default.to_string())
    }
    fn num(&self, name: &str, default: f64) -> R<f64> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("{name} {v}: not a number")),
        }
    }
}

fn sender(name: &str) -> R<Sender> {
    let c = Channel::open_env(name).map_err(|e| format!("channel {name}: {e}"))?;
    let mut s = c.sender().map_err(|e| format!("channel {name}: {e}"))?;
    s.set_spin(0);
    Ok(s)
}

fn receiver(name: &str) -> R<Receiver> {
    let c = Channel::open_env(name).map_err(|e| format!("channel {name}: {e}"))?;
    let mut r = c.receiver().map_err(|e| format!("channel {name}: {e}"))?;
    r.set_spin(0);
    Ok(r)
}

/// Runs `job` once per activation of the supervisor's task until it asks to stop
/// (or SIGTERM); after each job the values `job` filled in are published as the
/// task's named counters `names`.
fn periodic(names: &[String], job: impl FnMut(&Activation, &mut [u64]) -> R<()>) -> R<()> {
    periodic_task(Task::attach().map_err(|e| e.to_string())?, names, job)
}

/// [`periodic`] of a task already attached.
fn periodic_task(
    mut task: Task,
    names: &[String],
    mut job: impl FnMut(&Activation, &mut [u64]) -> R<()>,
) -> R<()> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let slots = names
        .iter()
        .map(|n| task.counter(n))
        .collect::<Result<Vec<Counter>, _>>()
        .map_err(|e| e.to_string())?;
    let mut values = vec![0u64; names.len()];
    while !stop.load(Relaxed) {
        let activation = match task.wait_next_period() {
            Ok(a) => a,
            Err(bulkhead_task::Error::Stopped) => break,
            Err(e) => return Err(e.to_string()),
        };
        job(&activation, &mut values)?;
        for (slot, v) in slots.iter().zip(&values) {
            task.set_counter(*slot, *v);
        }
    }
    Ok(())
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// A: attaches to the virtual bus (waiting for it: the plant serves it) and moves
/// frames between it and `usb_rx` / `usb_tx`. A bus that goes away is attached again
/// when it is back.
fn usb_bh(flags: &Flags) -> R<()> {
    let bus = flags.or("--bus", "car");
    let (mut rx, mut tx) = (sender("usb_rx")?, receiver("usb_tx")?);
    let mut node: Option<Node> = None;
    let (mut seq, mut n, mut detached) = (0u64, UsbCounts::default(), 0u64);
    let result = periodic(&names(&["rx", "rx_dropped", "tx", "detached"]), |_, v| {
        if node.is_none() {
            node = Node::attach(&bus).ok();
        }
        if let Some(attached) = node.as_mut() {
            if let Err(e) = usb_step(attached, &mut rx, &mut tx, 64, &mut seq, &mut n) {
                // The wire is gone (the plant stopped): attach again once it is back.
                say(format!(
                    "usb-bh: bus {bus}: {e}; attaching again when it is back"
                ));
                node = None;
                detached += 1;
            }
        }
        v.copy_from_slice(&[n.rx, n.rx_dropped, n.tx, detached]);
        Ok(())
    });
    say(format!(
        "usb-bh: stopped: rx={} rx_dropped={} tx={} detached={detached}",
        n.rx, n.rx_dropped, n.tx
    ));
    result
}

/// B: the gateway's reader over `usb_rx`, to every `--to` channel.
fn mhydra_rx(flags: &Flags) -> R<()> {
    let to = match flags.all("--to") {
        t if t.is_empty() => names(&["ivi_can_rx", "adas_can_rx"]),
        t => t,
    };
    let links = to
        .iter()
        .map(|c| Ok((c.clone(), sender(c)?)))
        .collect::<R<Vec<_>>>()?;
    let bus = ChanBus {
        rx: Some(receiver("usb_rx")?),
        tx: None,
        dropped: Arc::default(),
    };
    let (mut reader, counters) =
        BusReader::new("car", Box::new(bus), links).map_err(|e| e.to_string())?;
    let named: Vec<String> = counters
        .named(Role::Reader)
        .into_iter()
        .map(|c| c.0)
        .collect();
    let result = periodic(&named, |_, v| {
        reader
            .step(64, &mut bulkhead_trace::Discard)
            .map_err(|e| e.to_string())?;
        let mut k = 0;
        counters.for_each_value(Role::Reader, |x| {
            v[k] = x;
            k += 1;
        });
        Ok(())
    });
    report("mhydra-rx", &counters.named(Role::Reader));
    result
}

fn report(who: &str, counters: &[(String, u64)]) {
    let text: Vec<String> = counters.iter().map(|(n, v)| format!("{n}={v}")).collect();
    say(format!("{who}: stopped: {}", text.join(" ")));
}

/// H: the gateway's writer: each `--from CHANNEL=IDS` (allowlist, hex or decimal) to
/// `usb_tx`, each channel at the gateway's default limit for its ids ([`Limit::of_ids`]).
fn mhydra_tx(flags: &Flags) -> R<()> {
    let from = match flags.all("--from") {
        f if f.is_empty() => names(&["ivi_can_tx=", "adas_can_tx=0x343", "adas_raw_tx=0x2E4"]),
        f => f,
    };
    let mut links = Vec::new();
    for spec in &from {
        let (chan, ids) = spec.split_once('=').unwrap_or((spec, ""));
        let allow: HashSet<CanId> = parse_ids(ids)?.into_iter().collect();
        links.push(WriterLink {
            partition: chan.to_string(),
            from_partition: receiver(chan)?,
            limit: Limit::of_ids(&allow, |_| None),
            allow,
        });
    }
    let dropped = Arc::new(AtomicU64::new(0));
    let bus = ChanBus {
        rx: None,
        tx: Some(sender("usb_tx")?),
        dropped: dropped.clone(),
    };
    let (mut writer, counters) =
        BusWriter::new("car", Box::new(bus), links).map_err(|e| e.to_string())?;
    let mut named: Vec<String> = counters
        .named(Role::Writer)
        .into_iter()
        .map(|c| c.0)
        .collect();
    named.push("usb_tx_dropped".into());
    let result = periodic(&named, |_, v| {
        writer.step(64, now_ns()).map_err(|e| e.to_string())?;
        let mut k = 0;
        counters.for_each_value(Role::Writer, |x| {
            v[k] = x;
            k += 1;
        });
        v[k] = dropped.load(Relaxed);
        Ok(())
    });
    report("mhydra-tx", &counters.named(Role::Writer));
    result
}

/// C / E: decodes the frames the gateway forwards (SPEED, WHEEL_SPEEDS, GAS_PEDAL,
/// BRAKE_MODULE) and publishes the signals as [`Sensors`] when one changed, from the
/// first SPEED on.
fn read_mapper(flags: &Flags, from: &str, to: &str) -> R<()> {
    let db = car::dbc();
    let mut rx = receiver(&flags.or("--from", from))?;
    let mut tx = sender(&flags.or("--to", to))?;
    let mut dash = flags.get("--dash").map(|c| sender(&c)).transpose()?;
    let mut cluster = Cluster {
        gear: 255,
        ..Cluster::default()
    };
    let (mut s, mut speed_seen) = (Sensors::default(), false);
    let (mut published, mut dropped, mut undecodable) = (0u64, 0u64, 0u64);
    let mut buf = [0u8; WIRE_SIZE];
    periodic(
        &names(&["frames", "published", "dropped", "undecodable"]),
        |_, v| {
            let before = s.frames;
            for _ in 0..64 {
                if rx.try_read(&mut buf).is_err() {
                    break;
                }
                let Ok((t_ns, _, frame)) = gateway::decode(&buf) else {
                    undecodable += 1;
                    continue;
                };
                if frame.id() == CanId::standard(HVAC_STATUS_ID).expect("11 bits") {
                    echo(&mut cluster, frame.data());
                    continue;
                }
                match db.decode(&frame) {
                    Ok(d) => {
                        speed_seen |= d.message == "SPEED";
                        apply(&mut s, t_ns, d.message, &d.signals);
                        apply_cluster(&mut cluster, d.message, &d.signals);
                    }
                    Err(_) => undecodable += 1,
                }
            }
            // Nothing is published before the first SPEED: a speed of 0 would be news.
            if s.frames != before && speed_seen {
                match tx.try_write(&s.encode()) {
                    Ok(()) => published += 1,
                    Err(_) => dropped += 1,
                }
                if let Some(d) = dash.as_mut() {
                    cluster.sensors = s;
                    // A latest channel: wait-free, never full.
                    let _ = d.try_write(&cluster.encode());
                }
            }
            v.copy_from_slice(&[u64::from(s.frames), published, dropped, undecodable]);
            Ok(())
        },
    )
}

/// Folds the signals only the cluster shows into `c` (wheel speeds km/h to m/s).
fn apply_cluster(c: &mut Cluster, message: &str, signals: &[(&str, f64)]) {
    let get = |name: &str| signals.iter().find(|x| x.0 == name).map(|x| x.1);
    match message {
        "WHEEL_SPEEDS" => {
            let names = ["FL", "FR", "RL", "RR"].map(|w| format!("WHEEL_SPEED_{w}"));
            for (slot, name) in c.wheels.iter_mut().zip(&names) {
                *slot = (get(name).unwrap_or(0.0) / 3.6) as f32;
            }
        }
        "STEER_ANGLE_SENSOR" => c.steer_deg = get("STEER_ANGLE").unwrap_or(0.0) as f32,
        "GEAR_PACKET" => c.gear = get("GEAR").unwrap_or(255.0) as u8,
        _ => {}
    }
}

/// An HVAC status frame: the setting the HVAC unit took.
fn echo(c: &mut Cluster, data: &[u8]) {
    if let Some(h) = Hvac::from_frame_data(data) {
        c.hvac = h;
        c.hvac_echoes = c.hvac_echoes.wrapping_add(1);
    }
}

/// Folds one decoded message into `s` (speeds km/h to m/s).
fn apply(s: &mut Sensors, t_ns: u64, message: &str, signals: &[(&str, f64)]) {
    let get = |name: &str| signals.iter().find(|x| x.0 == name).map(|x| x.1);
    let used = match message {
        "SPEED" => get("SPEED").map(|v| {
            s.v_ego = (v / 3.6) as f32;
            s.tag = get("ENCODER").unwrap_or(0.0) as u8;
        }),
        "WHEEL_SPEEDS" => {
            let wheels = [
                "WHEEL_SPEED_FL",
                "WHEEL_SPEED_FR",
                "WHEEL_SPEED_RL",
                "WHEEL_SPEED_RR",
            ];
            let sum: f64 = wheels.iter().filter_map(|w| get(w)).sum();
            s.wheel = (sum / 4.0 / 3.6) as f32;
            Some(())
        }
        "GAS_PEDAL" => get("GAS_PEDAL").map(|v| s.gas = v as f32),
        "BRAKE_MODULE" => {
            s.brake_pressed = get("BRAKE_PRESSED").unwrap_or(0.0) != 0.0;
            get("BRAKE_PRESSURE").map(|v| s.brake_pressure = v as f32)
        }
        _ => None,
    };
    if used.is_some() {
        s.t_ns = t_ns;
        s.frames = s.frames.wrapping_add(1);
    }
}

/// D: the IVI's HVAC commands (channel 2, [`Hvac`]) as HVAC command frames (0x3E0)
/// to the gateway, whose allowlist decides what reaches the bus. A command out of
/// range (or not an HVAC command) is refused and counted; `last_sent` and
/// `last_refused` are the seqs of the newest of each, for the IVI to show.
fn ivi_write_mapper(flags: &Flags) -> R<()> {
    let mut rx = receiver(&flags.or("--from", "hvac_control"))?;
    let mut tx = sender(&flags.or("--to", "ivi_can_tx"))?;
    let id = CanId::standard(HVAC_COMMAND_ID).expect("11 bits");
    let mut n = [0u64; 5];
    let mut buf = [0u8; SIZE];
    periodic(
        &names(&[
            "forwarded",
            "dropped",
            "refused",
            "last_sent",
            "last_refused",
        ]),
        |_, v| {
            for _ in 0..16 {
                if rx.try_read(&mut buf).is_err() {
                    break;
                }
                let seq = u64::from(u32::from_le_bytes(buf[4..8].try_into().expect("4")));
                let Ok(h) = Hvac::decode(&buf) else {
                    n[2] += 1;
                    n[4] = seq;
                    continue;
                };
                let frame = Frame::new(id, &h.frame_data()).expect("3 bytes");
                let msg = gateway::encode(0, 0, &frame).expect("classic frame");
                match tx.try_write(&msg) {
                    Ok(()) => (n[0], n[3]) = (n[0] + 1, seq),
                    Err(_) => n[1] += 1,
                }
            }
            v.copy_from_slice(&n);
            Ok(())
        },
    )
}

/// F: the newest acceleration command of channel 4 as an ACC_CONTROL frame (ACCEL_CMD
/// clamped to ISO 15622's -3.5..2.0 m/s^2) to the gateway.
fn adas_write_mapper(flags: &Flags) -> R<()> {
    let db = car::dbc();
    let mut rx = receiver(&flags.or("--from", "carla_control"))?;
    let mut tx = sender(&flags.or("--to", "adas_can_tx"))?;
    let (mut sent, mut dropped, mut bad) = (0u64, 0u64, 0u64);
    let mut buf = [0u8; SIZE];
    periodic(&names(&["sent", "dropped", "refused"]), |_, v| {
        let mut newest = None;
        for _ in 0..16 {
            if rx.try_read(&mut buf).is_err() {
                break;
            }
            newest = Some(Actuation::decode(&buf));
        }
        if let Some(a) = newest {
            if !a.accel.is_finite() {
                bad += 1;
            } else {
                let accel = f64::from(a.accel).clamp(-3.5, 2.0);
                let on = f64::from(u8::from(a.active));
                let frame = car::encode(
                    &db,
                    "ACC_CONTROL",
                    &[
                        ("ACCEL_CMD", accel),
                        ("PERMIT_BRAKING", on),
                        ("RELEASE_STANDSTILL", on),
                        ("ACC_TYPE", on),
                        ("CANCEL_REQ", f64::from(u8::from(a.cancel))),
                        ("ITS_CONNECT_LEAD", f64::from(a.tag)),
                    ],
                );
                let msg = gateway::encode(0, 0, &frame).expect("classic frame");
                match tx.try_write(&msg) {
                    Ok(()) => sent += 1,
                    Err(_) => dropped += 1,
                }
            }
        }
        v.copy_from_slice(&[sent, dropped, bad]);
        Ok(())
    })
}

/// Wake-up lateness thresholds of the probe's counters, ns.
pub const PROBE_OVER_NS: [u64; 6] = [50_000, 100_000, 200_000, 1_000_000, 2_000_000, 10_000_000];

/// The platform's floor: an rt task that does nothing but note how late it woke
/// (start of its job minus its release), so that what the other tasks suffer can be
/// laid beside what the machine gives a task that needs nothing. Counters: `wakeups`,
/// `late_sum_ns`, `late_max_ns`, and `over_<us>us` for each of [`PROBE_OVER_NS`].
fn probe() -> R<()> {
    let mut counters = names(&["wakeups", "late_sum_ns", "late_max_ns"]);
    counters.extend(PROBE_OVER_NS.iter().map(|t| format!("over_{}us", t / 1000)));
    let mut n = vec![0u64; counters.len()];
    let result = periodic(&counters, |a, v| {
        let late = now_ns().saturating_sub(a.release_ns);
        n[0] += 1;
        n[1] += late;
        n[2] = n[2].max(late);
        for (slot, t) in n[3..].iter_mut().zip(PROBE_OVER_NS) {
            *slot += u64::from(late > t);
        }
        v.copy_from_slice(&n);
        Ok(())
    });
    let named: Vec<(String, u64)> = counters.into_iter().zip(n).collect();
    report("probe", &named);
    result
}

/// G: the longitudinal controller service (see [`crate::service`]).
fn long_controller() -> R<()> {
    let mut cmd = receiver("long_control_command")?;
    let mut data = receiver("long_control_data")?;
    let mut input = receiver("long_update_input")?;
    let mut output = sender("long_update_output")?;
    let mut c = Controller::new();
    let mut lost = 0u64;
    let mut buf = [0u8; SIZE];
    let result = periodic(
        &names(&["inits", "resets", "updates", "rejected", "lost"]),
        |_, v| {
            for _ in 0..10 {
                if cmd.try_read(&mut buf).is_err() {
                    break;
                }
                let mut next_data = || read(&mut data);
                let mut next_input = || read(&mut input);
                if let Some(out) = c.handle(&buf, &mut next_data, &mut next_input) {
                    if output.try_write(&out.encode()).is_err() {
                        lost += 1;
                    }
                }
            }
            let n = c.counts;
            v.copy_from_slice(&[n.inits, n.resets, n.updates, n.rejected, lost]);
            Ok(())
        },
    );
    let n = c.counts;
    say(format!(
        "long-controller: stopped: inits={} resets={} updates={} rejected={}{}",
        n.inits,
        n.resets,
        n.updates,
        n.rejected,
        c.last_reject
            .map(|r| format!(" (last: {r})"))
            .unwrap_or_default()
    ));
    result
}

fn read(rx: &mut Receiver) -> Option<Msg> {
    let mut m = [0u8; SIZE];
    rx.try_read(&mut m).ok().map(|_| m)
}

const CLUSTER_PORT: u16 = 47002;

/// K: the ADAS read mapper of the Linux side (the paper's AML, its reading half) with
/// OpenPilot's planner, an rt task (Table 3: 0.1 ms every 1 ms). At its first job it
/// sends INIT (the RAV4 tuning at the task's rate) over channels 5 and 6; then every
/// job, from the first reading on, the newest sensors of channel 3 and the plan as an
/// UPDATE over channels 7 and 5, and the plan to `adas_plan` for OpenPilot's Linux
/// side. An UPDATE that finds a channel full is dropped and counted.
fn aml_read(flags: &Flags) -> R<()> {
    let set = Series::parse(&flags.or("--set", "72@0,90@2"))?;
    let lead = match flags.get("--lead") {
        Some(l) => Some((Series::parse(&l)?, flags.num("--lead-gap", 60.0)?)),
        None => None,
    };
    let mut planner = Planner::new(set, lead);
    let mut sensors = receiver("carla_sensor")?;
    let mut cmd = sender("long_control_command")?;
    let mut data = sender("long_control_data")?;
    let mut input = sender("long_update_input")?;
    let mut plan_out = sender("adas_plan")?;
    let task = Task::attach().map_err(|e| e.to_string())?;
    let dt = task.params().period_ns as f64 / 1e9;
    let mut params = Params::rav4();
    params.rate_hz = (1.0 / dt) as f32;
    let (mut seq, mut first_release) = (1u64, None);
    let (mut dropped, mut no_reading) = (0u64, 0u64);
    let mut tracking = Tracking::default();
    let mut buf = [0u8; SIZE];
    let result = periodic_task(
        task,
        &names(&["updates_sent", "dropped", "no_reading"]),
        |a, v| {
            if first_release.is_none() {
                send_init(&mut cmd, &mut data, &params)?;
                first_release = Some(a.release_ns);
            }
            if sensors.try_read(&mut buf).is_ok() {
                let s = Sensors::decode(&buf);
                let t = (a.release_ns - first_release.unwrap_or(a.release_ns)) as f64 / 1e9;
                let plan = planner.update(t, f64::from(s.v_ego), dt);
                tracking.add(plan.v_target - f64::from(s.v_ego));
                match send_update(&mut cmd, &mut input, seq + 1, &s, &plan) {
                    true => seq += 1,
                    false => dropped += 1,
                }
                let p = PlanState {
                    seq,
                    t_s: t as f32,
                    v_ego: s.v_ego,
                    set: plan.set as f32,
                    v_target: plan.v_target as f32,
                    a_target: plan.a_target as f32,
                    gap: plan.gap as f32,
                };
                // A latest channel: wait-free, never full.
                let _ = plan_out.try_write(&p.encode());
            } else {
                no_reading += 1;
            }
            v.copy_from_slice(&[seq - 1, dropped, no_reading]);
            Ok(())
        },
    );
    say(format!(
        "aml-read: stopped: {} updates sent, {dropped} dropped; {}",
        seq - 1,
        tracking.summary()
    ));
    result
}

/// INIT with `params` (records on channel 6, then the command on channel 5).
fn send_init(cmd: &mut Sender, data: &mut Sender, params: &Params) -> R<()> {
    let records = InitRecord::all(params, 1);
    for r in &records {
        data.try_write(r).map_err(|e| format!("INIT data: {e}"))?;
    }
    let init = Command {
        seq: 1,
        op: Op::Init {
            records: records.len() as u32,
        },
    };
    cmd.try_write(&init.encode())
        .map_err(|e| format!("INIT: {e}"))
}

/// One UPDATE (input on channel 7, then the command on channel 5); false if a
/// channel was full (an input without its command is skipped by the controller).
fn send_update(
    cmd: &mut Sender,
    input: &mut Sender,
    seq: u64,
    s: &Sensors,
    plan: &crate::scenario::Plan,
) -> bool {
    let x = crate::longcontrol::Input {
        v_ego: s.v_ego,
        a_ego: 0.0,
        v_target: plan.v_target as f32,
        a_target: plan.a_target as f32,
        active: true,
        brake_pressed: s.brake_pressed,
        gas_pressed: false,
    };
    let msg = UpdateInput {
        seq,
        sent_ns: now_ns(),
        input: x,
        tag: s.tag,
    };
    let update = Command {
        seq,
        op: Op::Update,
    };
    input.try_write(&msg.encode()).is_ok() && cmd.try_write(&update.encode()).is_ok()
}

/// L: the ADAS write mapper of the Linux side (the paper's AML, its writing half), an
/// rt task (Table 3: 0.1 ms every 1 ms): every job, the controller's outputs of
/// channel 8; the newest as the acceleration command to channel 4. Notes each
/// output's round trip (K's send -> read here) and the UPDATEs never answered (gaps
/// in the sequence).
fn aml_write() -> R<()> {
    let mut output = receiver("long_update_output")?;
    let mut control = sender("carla_control")?;
    let mut responses = RoundTrips::new();
    // The INIT's number: the UPDATEs are numbered from 2, so a gap before the first
    // output read counts too.
    let (mut last_seq, mut lost, mut sent, mut dropped) = (1u64, 0u64, 0u64, 0u64);
    let mut max_ns = 0u64;
    let mut buf = [0u8; SIZE];
    let result = periodic(
        &names(&[
            "answered",
            "unanswered",
            "sent",
            "dropped",
            "round_trip_max_us",
        ]),
        |_, v| {
            let mut newest = None;
            for _ in 0..16 {
                if output.try_read(&mut buf).is_err() {
                    break;
                }
                let out = UpdateOutput::decode(&buf);
                let round_trip = now_ns().saturating_sub(out.sent_ns);
                max_ns = max_ns.max(round_trip);
                responses.add(round_trip);
                if out.seq > last_seq + 1 {
                    lost += out.seq - last_seq - 1;
                }
                last_seq = last_seq.max(out.seq);
                newest = Some(out);
            }
            if let Some(out) = newest {
                let a = Actuation {
                    seq: out.seq,
                    accel: out.out.accel,
                    active: true,
                    cancel: false,
                    tag: out.tag,
                };
                match control.try_write(&a.encode()) {
                    Ok(()) => sent += 1,
                    Err(_) => dropped += 1,
                }
            }
            let n = responses.n;
            v.copy_from_slice(&[n, lost, sent, dropped, max_ns / 1000]);
            Ok(())
        },
    );
    say(format!(
        "aml-write: stopped: {} commands sent, {dropped} dropped; {}",
        sent,
        responses.summary(lost, max_ns)
    ));
    result
}

/// OpenPilot's Linux side: prints the ADAS read mapper's plan (channel `adas_plan`)
/// once a second.
fn openpilot() -> R<()> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let mut plan = receiver("adas_plan")?;
    let mut buf = [0u8; SIZE];
    while !stop.load(Relaxed) {
        std::thread::sleep(Duration::from_secs(1));
        if plan.try_read(&mut buf).is_ok() {
            let p = PlanState::decode(&buf);
            println!(
                "openpilot: t={:.1}s v={:.1}km/h set={:.1}km/h target={:.1}km/h a_target={:+.2} gap={:.0}m updates={}",
                p.t_s,
                p.v_ego * 3.6,
                p.set * 3.6,
                p.v_target * 3.6,
                p.a_target,
                p.gap,
                p.seq - 1
            );
        }
    }
    Ok(())
}

/// The speed tracking error: the planner's target minus the speed read from the bus,
/// at each UPDATE.
#[derive(Debug, Default)]
struct Tracking {
    n: u64,
    sum_sq: f64,
    max: f64,
}

impl Tracking {
    fn add(&mut self, err_ms: f64) {
        self.n += 1;
        self.sum_sq += err_ms * err_ms;
        self.max = self.max.max(err_ms.abs());
    }

    fn summary(&self) -> String {
        let rms = (self.sum_sq / self.n.max(1) as f64).sqrt();
        format!(
            "tracking error rms {:.3} max {:.3} km/h over {} updates",
            rms * 3.6,
            self.max * 3.6,
            self.n
        )
    }
}

/// The controller's response times (UPDATE sent -> its output read) so far.
/// Round trips counted in 1 us buckets up to [`RoundTrips::BUCKETS`] us (the last one
/// holds the longer ones): a fixed table, touched before the first job, so that an rt
/// task that runs for hours neither grows a list nor faults in pages in its jobs.
struct RoundTrips {
    counts: Vec<u32>,
    n: u64,
}

impl RoundTrips {
    const BUCKETS: usize = 50_000;

    fn new() -> RoundTrips {
        // Written, not calloc'ed: every page is in memory before the first job.
        let mut counts = vec![u32::MAX; Self::BUCKETS + 1];
        counts.fill(0);
        RoundTrips { counts, n: 0 }
    }

    fn add(&mut self, ns: u64) {
        let us = ((ns / 1000) as usize).min(Self::BUCKETS);
        self.counts[us] = self.counts[us].saturating_add(1);
        self.n += 1;
    }

    /// The bucket (us) holding the round trip of rank `p` (0..=1) among those counted.
    fn quantile_us(&self, p: f64) -> usize {
        let rank = ((self.n.saturating_sub(1)) as f64 * p).round() as u64;
        let mut seen = 0u64;
        for (us, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen > rank {
                return us;
            }
        }
        0
    }

    fn summary(&self, timeouts: u64, max_ns: u64) -> String {
        format!(
            "{} updates answered, {timeouts} unanswered; controller response median {} us, p99 {} us, max {:.0} us",
            self.n,
            self.quantile_us(0.5),
            self.quantile_us(0.99),
            max_ns as f64 / 1e3
        )
    }
}

/// The infotainment mapper of the Linux side (IML): channel 1 to the cluster (UDP on
/// the partition's loopback, as the paper's FIFO pipes between IC, IVI and IML).
fn ivi_mapper() -> R<()> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let mut rx = receiver("ic_ivi_sensor")?;
    let udp = UdpSocket::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let mut buf = [0u8; SIZE];
    let mut n = 0u64;
    while !stop.load(Relaxed) {
        if rx
            .read_timeout(&mut buf, Duration::from_millis(100))
            .is_ok()
        {
            n += 1;
            if n % 25 == 0 {
                let s = Sensors::decode(&buf);
                let line = format!(
                    "speed {:.1} km/h, wheels {:.1} km/h, gas {:.0} %, brake {:.0}",
                    s.v_ego * 3.6,
                    s.wheel * 3.6,
                    s.gas,
                    s.brake_pressure
                );
                let _ = udp.send_to(line.as_bytes(), ("127.0.0.1", CLUSTER_PORT));
            }
        }
    }
    println!("ivi-mapper: {n} sensor readings");
    Ok(())
}

/// The cluster and OpenPilot's UI: prints what its mapper sends, at most once a second.
fn listen(who: &str, port: u16) -> R<()> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let udp = UdpSocket::bind(("127.0.0.1", port)).map_err(|e| format!("port {port}: {e}"))?;
    udp.set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let mut buf = [0u8; 512];
    let mut last = 0u64;
    while !stop.load(Relaxed) {
        if let Ok(n) = udp.recv(&mut buf) {
            if now_ns() - last >= 1_000_000_000 {
                last = now_ns();
                println!("{who}: {}", String::from_utf8_lossy(&buf[..n]));
            }
        }
    }
    Ok(())
}

/// The vehicle plant: serves the virtual bus, publishes the car's messages at their
/// real rates, applies the ACC_CONTROL commands it receives (DriveOS's CARLA).
fn plant(flags: &Flags) -> R<()> {
    let stop = stop_on_signals().map_err(|e| e.to_string())?;
    let name = flags.or("--bus", "car");
    let _bus = Bus::bind(&name, 500_000)
        .map_err(|e| format!("bus {name}: {e}"))?
        .spawn();
    if let Some(log) = flags.get("--replay") {
        let loops = flags.or("--loops", "1");
        let loops = match loops.parse::<u64>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => return Err(format!("--loops {loops}: want a count (0: for ever)")),
        };
        return replay(&name, &log, &flags.or("--iface", "can0"), loops, stop);
    }
    let mut node = Node::attach(&name).map_err(|e| format!("bus {name}: {e}"))?;
    let car = Car {
        grade_rad: (flags.num("--grade", 0.0)? / 100.0).atan(),
        ..Car::default()
    };
    let mut p = Plant::new(car, flags.num("--v0", 72.0)? / 3.6);
    let create = |flag: &str| -> R<Option<std::fs::File>> {
        match flags.get(flag) {
            Some(path) => std::fs::File::create(&path)
                .map(Some)
                .map_err(|e| format!("{flag} {path}: {e}")),
            None => Ok(None),
        }
    };
    let report = create("--report")?;
    let mut delay_log = create("--delays")?.map(std::io::BufWriter::new);
    let periods = periods(flags.num("--speed-hz", 0.0)?)?;
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
/// `speed_hz` instead unless it is 0 (1 to 1000 Hz: the plant steps every 1 ms).
fn periods(speed_hz: f64) -> R<[(&'static str, u64); 4]> {
    let mut periods = car::PERIODS_US;
    if speed_hz != 0.0 {
        if !(1.0..=1000.0).contains(&speed_hz) {
            return Err(format!("--speed-hz {speed_hz}: 1 to 1000"));
        }
        for p in periods.iter_mut().filter(|p| p.0 == "SPEED") {
            p.1 = (1e6 / speed_hz).round() as u64;
        }
    }
    Ok(periods)
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
    // usb-bh attaches at its next job once the bus exists; a node sees only frames
    // sent after it attached, so the log starts half a second later.
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
fn frame(db: &bulkhead_can::dbc::Database, message: &str, p: &Plant, tag: u8) -> Frame {
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

/// Writes frames (candump syntax, `343#00FF`) into a gateway channel the process
/// holds, as a partition's program sends CAN frames; the gateway's allowlist decides.
fn send_frame(flags: &Flags) -> R<()> {
    let chan = flags.get("--to").ok_or("--to CHANNEL is required")?;
    let mut tx = sender(&chan)?;
    for text in flags.0.iter().filter(|a| a.contains('#')) {
        let frame = parse_frame(text)?;
        let msg = gateway::encode(0, 0, &frame).expect("classic frame");
        tx.write_timeout(&msg, Duration::from_secs(1))
            .map_err(|e| format!("{chan}: {e}"))?;
    }
    Ok(())
}

/// `ID#HEXDATA` (ids above 0x7FF are 29-bit).
fn parse_frame(text: &str) -> R<Frame> {
    let bad = |what: &str| format!("{text}: {what} (want ID#HEXDATA, e.g. 343#00FF)");
    let (id, data) = text.split_once('#').ok_or_else(|| bad("no #"))?;
    let id = u32::from_str_radix(id, 16).map_err(|_| bad("bad id"))?;
    let id = match id <= 0x7FF {
        true => CanId::standard(id),
        false => CanId::extended(id),
    }
    .ok_or_else(|| bad("id out of range"))?;
    if data.len() % 2 != 0 || !data.is_ascii() {
        return Err(bad("bad data"));
    }
    let bytes = (0..data.len() / 2)
        .map(|k| u8::from_str_radix(&data[2 * k..2 * k + 2], 16))
        .collect::<Result<Vec<u8>, _>>()
        .map_err(|_| bad("bad data"))?;
    Frame::new(id, &bytes).map_err(|e| bad(&e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(a: &[&str]) -> Flags {
        Flags(a.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn round_trips_give_their_quantiles_from_the_buckets() {
        let mut r = RoundTrips::new();
        for us in 1..=100u64 {
            r.add(us * 1000 + 400);
        }
        r.add(3_600_000_000); // an hour: counted in the last bucket
        assert_eq!(
            (r.n, r.quantile_us(0.5), r.quantile_us(0.99)),
            (101, 51, 100)
        );
        assert_eq!(r.quantile_us(1.0), RoundTrips::BUCKETS);
        let text = r.summary(2, 3_600_000_000);
        assert!(
            text.starts_with("101 updates answered, 2 unanswered"),
            "{text}"
        );
        assert!(text.contains("median 51 us, p99 100 us"), "{text}");
    }

    #[test]
    fn flags_take_values_and_unknown_ones_are_refused() {
        let f = flags(&["--from", "a=0x343", "--from=b=", "--to", "c"]);
        assert_eq!(f.all("--from"), vec!["a=0x343", "b="]);
        assert_eq!(f.get("--to").as_deref(), Some("c"));
        assert_eq!(f.check(&["--from", "--to"], false), Ok(()));
        let e = flags(&["--speed", "3"])
            .check(&["--v0"], false)
            .unwrap_err();
        assert!(e.contains("--speed: unknown argument (takes --v0)"), "{e}");
        assert!(flags(&["--v0"])
            .check(&["--v0"], false)
            .unwrap_err()
            .contains("needs a value"));
        assert!(flags(&["x"])
            .check(&[], false)
            .unwrap_err()
            .contains("takes no arguments"));
        assert_eq!(
            flags(&["--to", "c", "343#00"]).check(&["--to"], true),
            Ok(())
        );
        assert!(flags(&["--v0", "fast"])
            .num("--v0", 1.0)
            .unwrap_err()
            .contains("--v0 fast"));
        assert_eq!(main(&["plant".into(), "--speed".into(), "1".into()]), 2);
        assert_eq!(main(&["nope".into()]), 2);
    }

    #[test]
    fn tracking_error_is_the_rms_and_the_largest_in_kmh() {
        let mut t = Tracking::default();
        t.add(3.0);
        t.add(-4.0); // rms sqrt(25 / 2) = 3.536 m/s
        assert_eq!(
            t.summary(),
            "tracking error rms 12.728 max 14.400 km/h over 2 updates"
        );
    }

    #[test]
    fn the_speed_rate_can_be_raised_for_the_benchmark() {
        assert_eq!(periods(0.0).unwrap(), car::PERIODS_US);
        let fast = periods(500.0).unwrap();
        assert_eq!(fast[1], ("SPEED", 2_000));
        assert_eq!(fast[0], car::PERIODS_US[0]);
        assert!(periods(2000.0).unwrap_err().contains("1 to 1000"));
    }

    #[test]
    fn frames_parse_in_candump_syntax() {
        let f = parse_frame("343#FF38").unwrap();
        assert_eq!((f.id(), f.data()), (ACC_CONTROL, &[0xFF, 0x38][..]));
        assert!(parse_frame("1ABCDEF0#").unwrap().id().is_extended());
        for bad in ["343", "xyz#00", "343#0", "343#GG", "343#001122334455667788"] {
            assert!(parse_frame(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn decoded_messages_fold_into_the_sensors() {
        let db = car::dbc();
        let mut s = Sensors::default();
        let p = Plant::new(Car::default(), 25.0);
        for m in ["SPEED", "WHEEL_SPEEDS", "BRAKE_MODULE", "GAS_PEDAL"] {
            let f = frame(&db, m, &p, 3);
            let d = db.decode(&f).unwrap();
            apply(&mut s, 7, d.message, &d.signals);
        }
        assert_eq!((s.frames, s.t_ns), (4, 7));
        assert!(
            (s.v_ego - 25.0).abs() < 0.01 && (s.wheel - 25.0).abs() < 0.01,
            "{s:?}"
        );
    }
}
