//! The programs of `bulkhead-app`, one module each, their command lines declared with
//! clap (see docs/vehicle.md for the data paths), and what they share: the channels
//! opened by name, the job loop of an rt task, and one-line reports on stderr.

use bulkhead_can::service::stop_on_signals;
use bulkhead_chan::{Channel, Receiver, Sender};
use bulkhead_task::{Activation, Counter, Task};
use clap::{CommandFactory, FromArgMatches, Parser};
use std::ffi::OsString;
use std::sync::atomic::Ordering::Relaxed;

mod adas_write_mapper;
mod aml_read;
mod aml_write;
mod dashboard;
mod instrument_cluster;
mod ivi_mapper;
mod ivi_write_mapper;
mod long_controller;
mod mhydra_rx;
mod mhydra_tx;
mod openpilot;
mod plant;
mod probe;
mod read_mapper;
mod send_frame;
mod usb_bh;

type R<T> = Result<T, String>;

/// The programs of the DriveOS vehicle (docs/vehicle.md). The rt tasks run under
/// `bulkhead run`, which releases their jobs; the others are best-effort processes.
#[derive(Parser)]
#[command(
    name = "bulkhead-app",
    arg_required_else_help = true,
    subcommand_value_name = "PROGRAM",
    subcommand_help_heading = "Programs"
)]
enum Program {
    /// rt task A: the only node on the bus: bus <-> usb_rx/usb_tx
    UsbBh(usb_bh::Args),
    /// rt task B: the gateway's reader: usb_rx -> each --to channel
    MhydraRx(mhydra_rx::Args),
    /// rt task H: the gateway's writer: each --from channel -> usb_tx, allowlisted
    MhydraTx(mhydra_tx::Args),
    /// rt task C: the IVI's gateway frames -> signals (channel 1)
    IviReadMapper(read_mapper::Args<read_mapper::Ivi>),
    /// rt task E: the ADAS's gateway frames -> signals (channel 3)
    AdasReadMapper(read_mapper::Args<read_mapper::Adas>),
    /// rt task D: channel 2's HVAC commands -> gateway
    IviWriteMapper(ivi_write_mapper::Args),
    /// rt task F: channel 4's acceleration commands -> gateway
    AdasWriteMapper(adas_write_mapper::Args),
    /// rt task G: the longitudinal controller, INIT/RESET/UPDATE over channels 5-8
    LongController,
    /// rt task K: channel 3 + the cruise plan -> UPDATEs (channels 5-7)
    AmlRead(aml_read::Args),
    /// rt task L: channel 8 -> channel 4
    AmlWrite,
    /// rt task: notes how late each job starts (the platform's floor)
    Probe,
    /// OpenPilot's Linux side: prints the ADAS read mapper's plan
    Openpilot,
    /// The infotainment mapper: channel 1 -> the instrument cluster
    IviMapper,
    /// The instrument cluster: prints the speed once a second
    InstrumentCluster,
    /// The dashboard in the browser: cluster, HVAC controls, system monitor
    Dashboard(dashboard::Args),
    /// The vehicle plant: serves the virtual bus and simulates the car, or replays a log
    Plant(plant::Args),
    /// Frames into a gateway channel (e.g. adas_raw_tx)
    SendFrame(send_frame::Args),
}

impl Program {
    fn run(self) -> R<()> {
        match self {
            Program::UsbBh(args) => usb_bh::run(&args),
            Program::MhydraRx(args) => mhydra_rx::run(&args),
            Program::MhydraTx(args) => mhydra_tx::run(args),
            Program::IviReadMapper(a) => read_mapper::run(&a.from, &a.to, a.dash.as_deref()),
            Program::AdasReadMapper(a) => read_mapper::run(&a.from, &a.to, a.dash.as_deref()),
            Program::IviWriteMapper(args) => ivi_write_mapper::run(&args),
            Program::AdasWriteMapper(args) => adas_write_mapper::run(&args),
            Program::LongController => long_controller::run(),
            Program::AmlRead(args) => aml_read::run(args),
            Program::AmlWrite => aml_write::run(),
            Program::Probe => probe::run(),
            Program::Openpilot => openpilot::run(),
            Program::IviMapper => ivi_mapper::run(),
            Program::InstrumentCluster => instrument_cluster::run(),
            Program::Dashboard(args) => dashboard::run(&args),
            Program::Plant(args) => plant::run(&args),
            Program::SendFrame(args) => send_frame::run(&args),
        }
    }
}

/// Runs the program `argv` names (`argv[0]` is the binary's path); the exit status: 0,
/// 1 when the program failed, 2 for a bad command line (clap's message, which names
/// the flag or the program).
pub fn main(argv: impl IntoIterator<Item = OsString>) -> i32 {
    let (name, program) = match parse(argv) {
        Ok(p) => p,
        Err(e) => {
            let _ = e.print();
            return e.exit_code();
        }
    };
    match program.run() {
        Ok(()) => 0,
        Err(e) => {
            say(format!("bulkhead-app {name}: error: {e}"));
            1
        }
    }
}

/// The program `argv` names, with its name.
fn parse(
    argv: impl IntoIterator<Item = impl Into<OsString> + Clone>,
) -> Result<(String, Program), clap::Error> {
    // As the programs always did: a flag given twice takes its last value, and a
    // number may be negative (so that `--loops -1` is refused as a bad count).
    let command = Program::command()
        .mut_subcommands(|s| s.args_override_self(true).allow_negative_numbers(true));
    let matches = command.try_get_matches_from(argv)?;
    let name = matches.subcommand_name().unwrap_or_default().to_string();
    Ok((name, Program::from_arg_matches(&matches)?))
}

/// One line on stderr in one write, so that the lines of processes sharing the
/// supervisor's stderr do not interleave.
fn say(line: String) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}

/// A flag's number: finite.
fn finite(text: &str) -> R<f64> {
    text.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .ok_or_else(|| "not a number".to_string())
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

/// `who: stopped: name=value ...` on stderr.
fn report(who: &str, counters: &[(String, u64)]) {
    let text: Vec<String> = counters.iter().map(|(n, v)| format!("{n}={v}")).collect();
    say(format!("{who}: stopped: {}", text.join(" ")));
}

/// The UDP port on the partition's loopback from the infotainment mapper to the
/// instrument cluster.
const CLUSTER_PORT: u16 = 47002;

#[cfg(test)]
mod tests {
    use super::*;

    /// What `bulkhead-app ARGS` parses into, or clap's error.
    fn parse(args: &[&str]) -> Result<Program, clap::Error> {
        let argv = std::iter::once("bulkhead-app").chain(args.iter().copied());
        super::parse(argv).map(|(_, program)| program)
    }

    #[test]
    fn the_command_line_is_consistent() {
        Program::command().debug_assert();
    }

    #[test]
    fn a_flag_given_twice_takes_its_last_value_and_lists_keep_every_one() {
        let Ok(Program::UsbBh(a)) = parse(&["usb-bh", "--bus", "a", "--bus=b"]) else {
            panic!("usb-bh did not parse");
        };
        assert_eq!(a.bus, "b");
        let Ok(Program::MhydraRx(a)) = parse(&["mhydra-rx", "--to", "x", "--to=y"]) else {
            panic!("mhydra-rx did not parse");
        };
        assert_eq!(a.to, ["x", "y"]);
        let Ok(Program::MhydraRx(a)) = parse(&["mhydra-rx"]) else {
            panic!("mhydra-rx did not parse");
        };
        assert_eq!(a.to, ["ivi_can_rx", "adas_can_rx"]);
    }

    #[test]
    fn bad_flags_and_values_are_usage_errors_naming_the_flag() {
        for (args, named) in [
            (&["plant", "--speed", "1"][..], "--speed"),
            (&["plant", "--v0", "fast"], "--v0"),
            (&["plant", "--grade", "inf"], "--grade"),
            (&["plant", "--speed-hz", "2000"], "--speed-hz"),
            (&["plant", "--loops", "-1"], "--loops"),
            (&["plant", "--bus"], "--bus"),
            (&["aml-read", "--set", "90@2,72@1"], "--set"),
            (&["mhydra-tx", "--from", "c=0xZZ"], "--from"),
            (&["send-frame", "--to", "c", "343#0"], "343#0"),
            (&["send-frame", "343#00"], "--to"),
            (&["probe", "x"], "'x'"),
            (&["nope"], "'nope'"),
        ] {
            let Err(e) = parse(args) else {
                panic!("{args:?} parsed");
            };
            assert_eq!(e.exit_code(), 2, "{args:?}");
            let text = e.to_string();
            assert!(text.contains(named), "{args:?}: {text}");
        }
        assert!(parse(&["plant", "--grade", "-3", "--v0=-1"]).is_ok());
    }
}
