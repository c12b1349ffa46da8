//! The longitudinal controller service (DriveOS 6.4.2): commands arrive on channel 5
//! (`long_control_command`), INIT and RESET data on channel 6
//! (`long_control_data`), UPDATE inputs on channel 7 (`long_update_input`);
//! UPDATE outputs leave on channel 8 (`long_update_output`).
//!
//! * **INIT** (`records` = n): n [`InitRecord`]s with the command's `seq` are read
//!   from channel 6 and applied to a copy of the current parameters; only if every
//!   record is valid and the result passes [`Params::check`] does the controller take
//!   them (and start again from off with an empty integrator).
//! * **RESET**: one [`ResetRecord`] with the command's `seq`; clears the integrator
//!   and the output history.
//! * **UPDATE**: the [`UpdateInput`] with the command's `seq` is read from channel 7
//!   and one [`UpdateOutput`] is returned. UPDATE before the first INIT is refused.
//!
//! A command that is malformed, or whose data is missing or does not match, is
//! refused, counted ([`Counts::rejected`]) and not acted on. Data left by a refused
//! command (records of an older `seq`) are skipped when the next command reads.

use crate::longcontrol::{LongControl, Params};
use crate::wire::{Command, InitRecord, Msg, Op, Reject, ResetRecord, UpdateInput, UpdateOutput};

/// What the service has done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub inits: u64,
    pub resets: u64,
    pub updates: u64,
    pub rejected: u64,
}

/// The service's state.
pub struct Controller {
    ctl: Option<LongControl>,
    pub counts: Counts,
    /// Why the last command was refused.
    pub last_reject: Option<Reject>,
}

/// At most this many stale messages are skipped while looking for a command's data
/// (a channel's depth).
const SKIP: usize = 10;

impl Default for Controller {
    fn default() -> Self {
        Self::new()
    }
}

impl Controller {
    pub fn new() -> Controller {
        Controller {
            ctl: None,
            counts: Counts::default(),
            last_reject: None,
        }
    }

    pub fn controller(&self) -> Option<&LongControl> {
        self.ctl.as_ref()
    }

    /// Handles command message `cmd`; `data` and `input` give the next message of
    /// channels 6 and 7 if there is one. Returns the UPDATE output to send.
    pub fn handle(
        &mut self,
        cmd: &Msg,
        data: &mut dyn FnMut() -> Option<Msg>,
        input: &mut dyn FnMut() -> Option<Msg>,
    ) -> Option<UpdateOutput> {
        match self.try_handle(cmd, data, input) {
            Ok(out) => out,
            Err(why) => {
                self.counts.rejected += 1;
                self.last_reject = Some(why);
                None
            }
        }
    }

    fn try_handle(
        &mut self,
        cmd: &Msg,
        data: &mut dyn FnMut() -> Option<Msg>,
        input: &mut dyn FnMut() -> Option<Msg>,
    ) -> Result<Option<UpdateOutput>, Reject> {
        let cmd = Command::decode(cmd)?;
        match cmd.op {
            Op::Init { records } => {
                let mut p = self.ctl.as_ref().map_or(Params::rav4(), |c| *c.params());
                for _ in 0..records {
                    let m = next_of(data, cmd.seq).ok_or("INIT data missing")?;
                    InitRecord::apply(&m, cmd.seq, &mut p)?;
                }
                p.check()?;
                self.ctl = Some(LongControl::new(p));
                self.counts.inits += 1;
                Ok(None)
            }
            Op::Reset => {
                let m = next_of(data, cmd.seq).ok_or("RESET data missing")?;
                ResetRecord::check(&m, cmd.seq)?;
                self.ctl.as_mut().ok_or("RESET before INIT")?.reset();
                self.counts.resets += 1;
                Ok(None)
            }
            Op::Update => {
                let m = next_of(input, cmd.seq).ok_or("UPDATE input missing")?;
                let x = UpdateInput::decode(&m)?;
                let ctl = self.ctl.as_mut().ok_or("UPDATE before INIT")?;
                let out = ctl.update(&x.input);
                self.counts.updates += 1;
                Ok(Some(UpdateOutput {
                    seq: x.seq,
                    sent_ns: x.sent_ns,
                    tag: x.tag,
                    out,
                }))
            }
        }
    }
}

/// The next message of a channel whose first 32-bit word is the low half of `seq`
/// (every message of channels 6 and 7 starts so), skipping older ones (left by
/// refused commands; compared modulo 2^32); None if there is none or a newer one is
/// first.
fn next_of(next: &mut dyn FnMut() -> Option<Msg>, seq: u64) -> Option<Msg> {
    for _ in 0..SKIP {
        let m = next()?;
        let s = u32::from_le_bytes(m[..4].try_into().expect("4 bytes"));
        match s.wrapping_sub(seq as u32) as i32 {
            0 => return Some(m),
            d if d > 0 => return None,
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::longcontrol::{Input, State};
    use std::collections::VecDeque;

    struct Chans {
        data: VecDeque<Msg>,
        input: VecDeque<Msg>,
    }

    impl Chans {
        fn new() -> Chans {
            Chans {
                data: VecDeque::new(),
                input: VecDeque::new(),
            }
        }
        fn send(&mut self, c: &mut Controller, cmd: Msg) -> Option<UpdateOutput> {
            let (data, input) = (&mut self.data, &mut self.input);
            c.handle(&cmd, &mut || data.pop_front(), &mut || input.pop_front())
        }
        fn init(&mut self, c: &mut Controller, seq: u64, p: &Params) {
            let records = InitRecord::all(p, seq);
            let n = records.len() as u32;
            self.data.extend(records);
            self.send(
                c,
                Command {
                    seq,
                    op: Op::Init { records: n },
                }
                .encode(),
            );
        }
        fn update(
            &mut self,
            c: &mut Controller,
            seq: u64,
            v_ego: f32,
            v_target: f32,
        ) -> Option<UpdateOutput> {
            let input = Input {
                v_ego,
                v_target,
                active: true,
                ..Input::default()
            };
            self.input.push_back(
                UpdateInput {
                    seq,
                    sent_ns: 5,
                    input,
                    tag: seq as u8,
                }
                .encode(),
            );
            self.send(
                c,
                Command {
                    seq,
                    op: Op::Update,
                }
                .encode(),
            )
        }
    }

    #[test]
    fn init_update_reset() {
        let (mut c, mut ch) = (Controller::new(), Chans::new());
        assert!(ch.update(&mut c, 1, 20.0, 21.0).is_none());
        assert_eq!(
            (c.counts.rejected, c.last_reject),
            (1, Some("UPDATE before INIT"))
        );
        ch.init(&mut c, 2, &Params::rav4());
        assert_eq!(c.counts.inits, 1);
        let mut out = None;
        for seq in 3..30 {
            out = ch.update(&mut c, seq, 20.0, 21.0);
        }
        let out = out.unwrap();
        assert_eq!(
            (out.seq, out.sent_ns, out.tag, out.out.state),
            (29, 5, 29, State::Pid)
        );
        assert!(out.out.i > 0.0);
        ch.data.push_back(ResetRecord::encode(40));
        ch.send(
            &mut c,
            Command {
                seq: 40,
                op: Op::Reset,
            }
            .encode(),
        );
        assert_eq!(c.counts.resets, 1);
        assert_eq!(c.controller().unwrap().integrator(), 0.0);
        assert_eq!(c.counts.rejected, 1);
    }

    #[test]
    fn a_malformed_command_is_refused_counted_and_not_acted_on() {
        let (mut c, mut ch) = (Controller::new(), Chans::new());
        ch.init(&mut c, 1, &Params::rav4());
        for seq in 2..20 {
            ch.update(&mut c, seq, 20.0, 21.0);
        }
        let i = c.controller().unwrap().integrator();
        // A RESET with a corrupted magic: refused; the integrator is untouched.
        ch.data.push_back(ResetRecord::encode(20));
        let mut bad = Command {
            seq: 20,
            op: Op::Reset,
        }
        .encode();
        bad[1] ^= 0xFF;
        ch.send(&mut c, bad);
        assert_eq!((c.counts.rejected, c.counts.resets), (1, 0));
        assert_eq!(c.controller().unwrap().integrator(), i);
        // An INIT whose limits are inverted: refused, the old parameters stay.
        let mut p = Params::rav4();
        p.accel_min = 3.0;
        ch.init(&mut c, 21, &p);
        assert_eq!((c.counts.rejected, c.counts.inits), (2, 1));
        assert_eq!(c.controller().unwrap().params().accel_min, -3.5);
        // An UPDATE whose input is not a number: refused, no output.
        let mut input = UpdateInput {
            seq: 22,
            ..UpdateInput::default()
        }
        .encode();
        input[16..20].copy_from_slice(&f32::NAN.to_le_bytes());
        ch.input.push_back(input);
        assert!(ch
            .send(
                &mut c,
                Command {
                    seq: 22,
                    op: Op::Update
                }
                .encode()
            )
            .is_none());
        assert_eq!(c.counts.rejected, 3);
        // The RESET record the refused RESET left is skipped by the next command.
        assert!(ch.update(&mut c, 23, 20.0, 21.0).is_some());
        ch.data.push_back(ResetRecord::encode(24));
        ch.send(
            &mut c,
            Command {
                seq: 24,
                op: Op::Reset,
            }
            .encode(),
        );
        assert_eq!(c.counts.resets, 1);
        assert_eq!(c.counts.rejected, 3);
    }
}
