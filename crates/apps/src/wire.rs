//! The 32-byte messages of the vehicle's channels (DriveOS Table 2; all
//! little-endian, every channel of `examples/driveos.yaml` has `message_size: 32`).
//!
//! | channel | message |
//! |---|---|
//! | 1 `ic_ivi_sensor`, 3 `carla_sensor` | [`Sensors`] |
//! | 2 `hvac_control` | a gateway frame message ([`bulkhead_can::gateway::encode`]) |
//! | 4 `carla_control` | [`Actuation`] |
//! | 5 `long_control_command` | [`Command`] |
//! | 6 `long_control_data` | [`InitRecord`] (INIT), [`ResetRecord`] (RESET) |
//! | 7 `long_update_input` | [`UpdateInput`] |
//! | 8 `long_update_output` | [`UpdateOutput`] |
//! | `adas_plan` | [`PlanState`] |

use crate::longcontrol::{Input, Output, Params, Schedule, State};

pub const SIZE: usize = 32;
pub type Msg = [u8; SIZE];

fn f32_at(m: &Msg, at: usize) -> f32 {
    f32::from_le_bytes(m[at..at + 4].try_into().expect("4 bytes"))
}
fn u32_at(m: &Msg, at: usize) -> u32 {
    u32::from_le_bytes(m[at..at + 4].try_into().expect("4 bytes"))
}
fn u64_at(m: &Msg, at: usize) -> u64 {
    u64::from_le_bytes(m[at..at + 8].try_into().expect("8 bytes"))
}
fn put(m: &mut Msg, at: usize, bytes: &[u8]) {
    m[at..at + bytes.len()].copy_from_slice(bytes);
}

/// Decoded car signals, as the read mappers publish them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sensors {
    /// Bus time of the newest frame used, ns.
    pub t_ns: u64,
    /// SPEED.SPEED, m/s.
    pub v_ego: f32,
    /// Mean of the four WHEEL_SPEEDS, m/s.
    pub wheel: f32,
    /// GAS_PEDAL.GAS_PEDAL, %.
    pub gas: f32,
    /// BRAKE_MODULE.BRAKE_PRESSURE (raw units).
    pub brake_pressure: f32,
    /// BRAKE_MODULE.BRAKE_PRESSED.
    pub brake_pressed: bool,
    /// SPEED.ENCODER of the newest SPEED frame: the plant's tag for measuring the
    /// controller pipeline's delay (carried to the ACC_CONTROL frame it causes).
    pub tag: u8,
    /// Frames decoded so far.
    pub frames: u32,
}

impl Sensors {
    pub fn encode(&self) -> Msg {
        let mut m = [0; SIZE];
        put(&mut m, 0, &self.t_ns.to_le_bytes());
        put(&mut m, 8, &self.v_ego.to_le_bytes());
        put(&mut m, 12, &self.wheel.to_le_bytes());
        put(&mut m, 16, &self.gas.to_le_bytes());
        put(&mut m, 20, &self.brake_pressure.to_le_bytes());
        m[24] = u8::from(self.brake_pressed);
        m[25] = self.tag;
        put(&mut m, 28, &self.frames.to_le_bytes());
        m
    }

    pub fn decode(m: &Msg) -> Sensors {
        Sensors {
            t_ns: u64_at(m, 0),
            v_ego: f32_at(m, 8),
            wheel: f32_at(m, 12),
            gas: f32_at(m, 16),
            brake_pressure: f32_at(m, 20),
            brake_pressed: m[24] != 0,
            tag: m[25],
            frames: u32_at(m, 28),
        }
    }
}

/// The acceleration command the ADAS mapper asks the write mapper to send.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Actuation {
    pub seq: u64,
    /// ACC_CONTROL.ACCEL_CMD, m/s^2.
    pub accel: f32,
    /// Cruise engaged (ACC_CONTROL.PERMIT_BRAKING and ACC_TYPE).
    pub active: bool,
    pub cancel: bool,
    /// The tag of the sensor reading this command answers ([`Sensors::tag`]).
    pub tag: u8,
}

impl Actuation {
    pub fn encode(&self) -> Msg {
        let mut m = [0; SIZE];
        put(&mut m, 0, &self.seq.to_le_bytes());
        put(&mut m, 8, &self.accel.to_le_bytes());
        m[12] = u8::from(self.active);
        m[13] = u8::from(self.cancel);
        m[14] = self.tag;
        m
    }

    pub fn decode(m: &Msg) -> Actuation {
        Actuation {
            seq: u64_at(m, 0),
            accel: f32_at(m, 8),
            active: m[12] != 0,
            cancel: m[13] != 0,
            tag: m[14],
        }
    }
}

/// The ADAS read mapper's (K's) plan at its newest UPDATE, for OpenPilot's Linux side
/// (channel `adas_plan`, latest).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PlanState {
    pub seq: u64,
    /// Seconds since K's first reading.
    pub t_s: f32,
    /// Speed read from the bus, set speed, planned target, m/s.
    pub v_ego: f32,
    pub set: f32,
    pub v_target: f32,
    pub a_target: f32,
    /// Distance to the lead car, m (infinite without one).
    pub gap: f32,
}

impl PlanState {
    pub fn encode(&self) -> Msg {
        let mut m = [0; SIZE];
        put(&mut m, 0, &self.seq.to_le_bytes());
        for (k, x) in [
            self.t_s,
            self.v_ego,
            self.set,
            self.v_target,
            self.a_target,
            self.gap,
        ]
        .iter()
        .enumerate()
        {
            put(&mut m, 8 + 4 * k, &x.to_le_bytes());
        }
        m
    }

    pub fn decode(m: &Msg) -> PlanState {
        PlanState {
            seq: u64_at(m, 0),
            t_s: f32_at(m, 8),
            v_ego: f32_at(m, 12),
            set: f32_at(m, 16),
            v_target: f32_at(m, 20),
            a_target: f32_at(m, 24),
            gap: f32_at(m, 28),
        }
    }
}

/// "LCMD": the first word of every controller command.
pub const COMMAND_MAGIC: u32 = 0x444d_434c;

/// The controller's commands (DriveOS 6.4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Parameters follow on channel 6: `records` [`InitRecord`]s.
    Init { records: u32 },
    /// One [`ResetRecord`] follows on channel 6.
    Reset,
    /// One [`UpdateInput`] with the same `seq` is on channel 7.
    Update,
}

/// A message of channel 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    pub seq: u64,
    pub op: Op,
}

/// Why a command is refused.
pub type Reject = &'static str;

impl Command {
    pub fn encode(&self) -> Msg {
        let mut m = [0; SIZE];
        put(&mut m, 0, &COMMAND_MAGIC.to_le_bytes());
        let (op, n) = match self.op {
            Op::Init { records } => (1u32, records),
            Op::Reset => (2, 1),
            Op::Update => (3, 0),
        };
        put(&mut m, 4, &op.to_le_bytes());
        put(&mut m, 8, &self.seq.to_le_bytes());
        put(&mut m, 16, &n.to_le_bytes());
        m
    }

    pub fn decode(m: &Msg) -> Result<Command, Reject> {
        if u32_at(m, 0) != COMMAND_MAGIC {
            return Err("bad magic");
        }
        if m[20..].iter().any(|&b| b != 0) {
            return Err("reserved bytes are not zero");
        }
        let n = u32_at(m, 16);
        let op = match (u32_at(m, 4), n) {
            (1, 1..=INIT_RECORDS) => Op::Init { records: n },
            (1, _) => return Err("INIT with a record count other than 1..=8"),
            (2, 1) => Op::Reset,
            (3, 0) => Op::Update,
            (2 | 3, _) => return Err("RESET takes 1 record, UPDATE none"),
            _ => return Err("unknown command"),
        };
        Ok(Command {
            seq: u64_at(m, 8),
            op,
        })
    }
}

/// At most this many INIT records (the channel's depth is 10).
pub const INIT_RECORDS: u32 = 8;

/// One INIT parameter record of channel 6: the low 32 bits of its command's `seq`, a
/// key and up to six values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InitRecord {
    pub seq: u64,
    pub key: Key,
    pub values: Vec6,
}

pub type Vec6 = [f32; 6];

/// What an INIT record sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key {
    /// kp schedule: n, breakpoints bp[0..n], gains v[0..n] as values
    /// `[n, bp0, bp1, bp2, v0, v1]`... see [`InitRecord::schedule`].
    Kp = 1,
    Ki = 2,
    /// `[kf, rate_hz]`
    FeedForward = 3,
    /// `[accel_min, accel_max, jerk_max]`
    Limits = 4,
    /// `[stopping_decel_rate, stop_accel, starting_accel_rate]`
    Stopping = 5,
}

impl InitRecord {
    /// Record layout: the low 32 bits of seq, key u16, n u16 (schedules: breakpoints),
    /// values 6 x f32 (schedules: bp[0..3] then v[0..3]).
    pub fn encode(&self, n: u16) -> Msg {
        let mut m = [0; SIZE];
        put(&mut m, 0, &(self.seq as u32).to_le_bytes());
        put(&mut m, 4, &(self.key as u16).to_le_bytes());
        put(&mut m, 6, &n.to_le_bytes());
        for (k, v) in self.values.iter().enumerate() {
            put(&mut m, 8 + 4 * k, &v.to_le_bytes());
        }
        m
    }

    /// The records that set `p` (for command `seq`).
    pub fn all(p: &Params, seq: u64) -> Vec<Msg> {
        let sched = |key, s: &Schedule| {
            let mut values = [0.0; 6];
            values[..3].copy_from_slice(&s.bp);
            values[3..].copy_from_slice(&s.v);
            InitRecord { seq, key, values }.encode(s.n as u16)
        };
        let plain = |key, v: &[f32]| {
            let mut values = [0.0; 6];
            values[..v.len()].copy_from_slice(v);
            InitRecord { seq, key, values }.encode(0)
        };
        vec![
            sched(Key::Kp, &p.kp),
            sched(Key::Ki, &p.ki),
            plain(Key::FeedForward, &[p.kf, p.rate_hz]),
            plain(Key::Limits, &[p.accel_min, p.accel_max, p.jerk_max]),
            plain(
                Key::Stopping,
                &[p.stopping_decel_rate, p.stop_accel, p.starting_accel_rate],
            ),
        ]
    }

    /// Applies record `m` of command `seq` to `p`.
    pub fn apply(m: &Msg, seq: u64, p: &mut Params) -> Result<(), Reject> {
        if u32_at(m, 0) != seq as u32 {
            return Err("INIT record of another command");
        }
        let n = u16::from_le_bytes([m[6], m[7]]) as usize;
        let v: Vec<f32> = (0..6).map(|k| f32_at(m, 8 + 4 * k)).collect();
        if !v.iter().all(|x| x.is_finite()) {
            return Err("INIT value is not a finite number");
        }
        let schedule = || {
            (1..=3)
                .contains(&n)
                .then(|| Schedule::new(&v[..n], &v[3..3 + n]))
                .flatten()
                .ok_or("schedule: 1 to 3 breakpoints, increasing, gains >= 0")
        };
        match u16::from_le_bytes([m[4], m[5]]) {
            1 => p.kp = schedule()?,
            2 => p.ki = schedule()?,
            3 => (p.kf, p.rate_hz) = (v[0], v[1]),
            4 => (p.accel_min, p.accel_max, p.jerk_max) = (v[0], v[1], v[2]),
            5 => (p.stopping_decel_rate, p.stop_accel, p.starting_accel_rate) = (v[0], v[1], v[2]),
            _ => return Err("unknown INIT key"),
        }
        Ok(())
    }
}

/// RESET's record: the low 32 bits of the command's `seq`, then [`COMMAND_MAGIC`].
pub struct ResetRecord;

impl ResetRecord {
    pub fn encode(seq: u64) -> Msg {
        let mut m = [0; SIZE];
        put(&mut m, 0, &(seq as u32).to_le_bytes());
        put(&mut m, 4, &COMMAND_MAGIC.to_le_bytes());
        m
    }

    pub fn check(m: &Msg, seq: u64) -> Result<(), Reject> {
        match u32_at(m, 0) == seq as u32 && u32_at(m, 4) == COMMAND_MAGIC {
            true => Ok(()),
            false => Err("RESET record does not match its command"),
        }
    }
}

/// Channel 7: one UPDATE's input, with the sender's clock for response times.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct UpdateInput {
    pub seq: u64,
    /// CLOCK_MONOTONIC when sent, ns (echoed in the output).
    pub sent_ns: u64,
    pub input: Input,
    /// The sensor reading's tag, echoed in the output (flags bits 8-15).
    pub tag: u8,
}

const ACTIVE: u32 = 1;
const BRAKE: u32 = 2;
const GAS: u32 = 4;

impl UpdateInput {
    /// seq u64, sent_ns u64, v_ego, v_target, a_target f32, flags u16, a_ego as f16-ish
    /// is not carried (the controller does not use it).
    pub fn encode(&self) -> Msg {
        let x = &self.input;
        let mut m = [0; SIZE];
        put(&mut m, 0, &self.seq.to_le_bytes());
        put(&mut m, 8, &self.sent_ns.to_le_bytes());
        put(&mut m, 16, &x.v_ego.to_le_bytes());
        put(&mut m, 20, &x.v_target.to_le_bytes());
        put(&mut m, 24, &x.a_target.to_le_bytes());
        let flags = (u32::from(x.active) * ACTIVE)
            | (u32::from(x.brake_pressed) * BRAKE)
            | (u32::from(x.gas_pressed) * GAS)
            | (u32::from(self.tag) << 8);
        put(&mut m, 28, &flags.to_le_bytes());
        m
    }

    pub fn decode(m: &Msg) -> Result<UpdateInput, Reject> {
        let (v_ego, v_target, a_target) = (f32_at(m, 16), f32_at(m, 20), f32_at(m, 24));
        if ![v_ego, v_target, a_target].iter().all(|x| x.is_finite()) {
            return Err("UPDATE input is not a finite number");
        }
        let flags = u32_at(m, 28);
        if flags & !(ACTIVE | BRAKE | GAS | 0xFF00) != 0 {
            return Err("UPDATE input has unknown flags");
        }
        Ok(UpdateInput {
            seq: u64_at(m, 0),
            sent_ns: u64_at(m, 8),
            input: Input {
                v_ego,
                a_ego: 0.0,
                v_target,
                a_target,
                active: flags & ACTIVE != 0,
                brake_pressed: flags & BRAKE != 0,
                gas_pressed: flags & GAS != 0,
            },
            tag: (flags >> 8) as u8,
        })
    }
}

/// Channel 8: one UPDATE's output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateOutput {
    pub seq: u64,
    /// The input's `sent_ns` and tag.
    pub sent_ns: u64,
    pub tag: u8,
    pub out: Output,
}

impl UpdateOutput {
    pub fn encode(&self) -> Msg {
        let mut m = [0; SIZE];
        put(&mut m, 0, &self.seq.to_le_bytes());
        put(&mut m, 8, &self.sent_ns.to_le_bytes());
        put(&mut m, 16, &self.out.accel.to_le_bytes());
        put(&mut m, 20, &self.out.p.to_le_bytes());
        put(&mut m, 24, &self.out.i.to_le_bytes());
        m[28] = self.out.state as u8;
        m[29] = self.tag;
        m
    }

    pub fn decode(m: &Msg) -> UpdateOutput {
        let state = match m[28] {
            1 => State::Pid,
            2 => State::Stopping,
            3 => State::Starting,
            _ => State::Off,
        };
        UpdateOutput {
            seq: u64_at(m, 0),
            sent_ns: u64_at(m, 8),
            tag: m[29],
            out: Output {
                accel: f32_at(m, 16),
                state,
                p: f32_at(m, 20),
                i: f32_at(m, 24),
                f: 0.0,
            },
        }
    }
}

/// "HVAC": the first word of an HVAC command (channel 2 `hvac_control`).
pub const HVAC_MAGIC: u32 = 0x4341_5648;
/// The IVI's HVAC command frame (not in the RAV4 DBC: the IVI's own message).
pub const HVAC_COMMAND_ID: u32 = 0x3E0;
/// The HVAC unit's status frame, echoing each command it took.
pub const HVAC_STATUS_ID: u32 = 0x3E1;
/// Set temperatures the HVAC takes, degC, in steps of 0.5.
pub const HVAC_TEMP: (f32, f32) = (16.0, 30.0);
/// Fan levels the HVAC takes (0 = off).
pub const HVAC_FAN_MAX: u8 = 7;

/// An HVAC setting the IVI asks for (channel 2); the write mapper checks the ranges.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Hvac {
    /// Counts the IVI's commands; the frame carries its low byte.
    pub seq: u32,
    pub temp_c: f32,
    pub fan: u8,
}

impl Hvac {
    pub fn encode(&self) -> Msg {
        let mut m = [0; SIZE];
        put(&mut m, 0, &HVAC_MAGIC.to_le_bytes());
        put(&mut m, 4, &self.seq.to_le_bytes());
        put(&mut m, 8, &self.temp_c.to_le_bytes());
        m[12] = self.fan;
        m
    }

    /// The command of `m` if it is one and its values are in range.
    pub fn decode(m: &Msg) -> Result<Hvac, Reject> {
        if u32_at(m, 0) != HVAC_MAGIC {
            return Err("not an HVAC command");
        }
        let h = Hvac {
            seq: u32_at(m, 4),
            temp_c: f32_at(m, 8),
            fan: m[12],
        };
        let t = h.temp_c;
        if !(HVAC_TEMP.0..=HVAC_TEMP.1).contains(&t) || (t * 2.0).fract() != 0.0 {
            return Err("temperature out of range (16 to 30 degC in steps of 0.5)");
        }
        if h.fan > HVAC_FAN_MAX || m[13..].iter().any(|&b| b != 0) {
            return Err("fan out of range (0 to 7)");
        }
        Ok(h)
    }

    /// The frame's data: the seq's low byte, the temperature in half degrees, the fan.
    pub fn frame_data(&self) -> [u8; 3] {
        [self.seq as u8, (self.temp_c * 2.0) as u8, self.fan]
    }

    /// The setting a command or status frame carries (seq's low byte only).
    pub fn from_frame_data(d: &[u8]) -> Option<Hvac> {
        match d {
            [seq, t2, fan, ..] => Some(Hvac {
                seq: u32::from(*seq),
                temp_c: f32::from(*t2) / 2.0,
                fan: *fan,
            }),
            _ => None,
        }
    }
}

/// What the instrument cluster shows: the IVI read mapper's [`Sensors`] and more of
/// the car's signals, on the dashboard's channel (`message_size: 64`, latest).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Cluster {
    pub sensors: Sensors,
    /// WHEEL_SPEEDS FL, FR, RL, RR, m/s.
    pub wheels: [f32; 4],
    /// STEER_ANGLE_SENSOR.STEER_ANGLE, degrees.
    pub steer_deg: f32,
    /// GEAR_PACKET.GEAR (0 D, 1 S, 8 N, 16 R, 32 P); 255 = not seen.
    pub gear: u8,
    /// The last HVAC status frame: the setting the HVAC unit took; echoes = 0 before
    /// the first.
    pub hvac: Hvac,
    pub hvac_echoes: u32,
}

/// A [`Cluster`] message.
pub const CLUSTER_SIZE: usize = 64;

impl Cluster {
    pub fn encode(&self) -> [u8; CLUSTER_SIZE] {
        let mut m = [0u8; CLUSTER_SIZE];
        m[..SIZE].copy_from_slice(&self.sensors.encode());
        for (k, w) in self.wheels.iter().enumerate() {
            m[32 + 4 * k..36 + 4 * k].copy_from_slice(&w.to_le_bytes());
        }
        m[48..52].copy_from_slice(&self.steer_deg.to_le_bytes());
        m[52] = self.gear;
        m[53] = self.hvac.seq as u8;
        m[54] = (self.hvac.temp_c * 2.0) as u8;
        m[55] = self.hvac.fan;
        m[56..60].copy_from_slice(&self.hvac_echoes.to_le_bytes());
        m
    }

    pub fn decode(m: &[u8; CLUSTER_SIZE]) -> Cluster {
        let f = |at: usize| f32::from_le_bytes(m[at..at + 4].try_into().expect("4 bytes"));
        Cluster {
            sensors: Sensors::decode(m[..SIZE].try_into().expect("32 bytes")),
            wheels: [f(32), f(36), f(40), f(44)],
            steer_deg: f(48),
            gear: m[52],
            hvac: Hvac::from_frame_data(&m[53..56]).expect("3 bytes"),
            hvac_echoes: u32::from_le_bytes(m[56..60].try_into().expect("4 bytes")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_round_trips() {
        let p = PlanState {
            seq: 7,
            t_s: 1.5,
            v_ego: 20.0,
            set: 25.0,
            v_target: 21.5,
            a_target: 1.5,
            gap: f32::INFINITY,
        };
        assert_eq!(PlanState::decode(&p.encode()), p);
    }

    #[test]
    fn init_records_round_trip_the_parameters() {
        let p = Params::rav4();
        let mut q = Params::rav4();
        q.kp = Schedule::constant(9.0);
        q.accel_max = 9.0;
        for m in InitRecord::all(&p, 7) {
            InitRecord::apply(&m, 7, &mut q).unwrap();
        }
        assert_eq!(p, q);
    }

    #[test]
    fn malformed_commands_are_refused() {
        let ok = Command {
            seq: 1,
            op: Op::Update,
        }
        .encode();
        assert_eq!(Command::decode(&ok).unwrap().op, Op::Update);
        let mut bad = ok;
        bad[0] ^= 1;
        assert_eq!(Command::decode(&bad), Err("bad magic"));
        let mut bad = ok;
        bad[4] = 9;
        assert_eq!(Command::decode(&bad), Err("unknown command"));
        let init = Command {
            seq: 1,
            op: Op::Init { records: 20 },
        }
        .encode();
        assert!(Command::decode(&init).is_err());
        let mut bad = ok;
        bad[31] = 1;
        assert!(Command::decode(&bad).is_err());
    }

    #[test]
    fn hvac_commands_out_of_range_are_refused() {
        let ok = Hvac {
            seq: 258,
            temp_c: 21.5,
            fan: 3,
        };
        assert_eq!(Hvac::decode(&ok.encode()), Ok(ok));
        assert_eq!(ok.frame_data(), [2, 43, 3]);
        for (temp_c, fan) in [(30.5, 1), (15.5, 1), (21.25, 1), (f32::NAN, 1), (21.0, 8)] {
            let bad = Hvac {
                seq: 1,
                temp_c,
                fan,
            };
            assert!(Hvac::decode(&bad.encode()).is_err(), "{bad:?}");
        }
        let c = Cluster {
            hvac: Hvac::from_frame_data(&ok.frame_data()).unwrap(),
            steer_deg: -12.5,
            gear: 32,
            ..Cluster::default()
        };
        assert_eq!(Cluster::decode(&c.encode()), c);
    }
}
