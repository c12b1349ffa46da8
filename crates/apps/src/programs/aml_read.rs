//! `bulkhead-app aml-read`, rt task K, and its cruise scenario.

use super::{finite, names, periodic_task, receiver, say, sender, R};
use crate::longcontrol::Params;
use crate::scenario::{Planner, Series};
use crate::wire::{Command, InitRecord, Op, PlanState, Sensors, UpdateInput, SIZE};
use bulkhead_chan::Sender;
use bulkhead_task::clock::now_ns;
use bulkhead_task::Task;

#[derive(clap::Args)]
pub struct Args {
    /// The set speed over time, km/h at s (from 2 s on, 90 km/h)
    #[arg(long, value_name = "KMH@S,...", value_parser = Series::parse, default_value = "72@0,90@2")]
    set: Series,
    /// A lead car's speed over time, km/h at s (linear between points)
    #[arg(long, value_name = "KMH@S,...", value_parser = Series::parse)]
    lead: Option<Series>,
    /// How far ahead the lead car starts, m
    #[arg(long, value_name = "M", value_parser = finite, default_value = "60")]
    lead_gap: f64,
}

/// K: the ADAS read mapper of the Linux side (the paper's AML, its reading half) with
/// OpenPilot's planner, an rt task (Table 3: 0.1 ms every 1 ms). At its first job it
/// sends INIT (the RAV4 tuning at the task's rate) over channels 5 and 6; then every
/// job, from the first reading on, the newest sensors of channel 3 and the plan as an
/// UPDATE over channels 7 and 5, and the plan to `adas_plan` for OpenPilot's Linux
/// side. An UPDATE that finds a channel full is dropped and counted.
pub fn run(args: Args) -> R<()> {
    let lead = args.lead.map(|l| (l, args.lead_gap));
    let mut planner = Planner::new(args.set, lead);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
