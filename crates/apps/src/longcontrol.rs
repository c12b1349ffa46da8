//! The longitudinal controller of DriveOS 6.4.2: OpenPilot's feed-forward PI
//! controller, as a pure state machine (the service task around it is
//! [`crate::service`]).
//!
//! Behaviour follows OpenPilot's `selfdrive/controls/lib/longcontrol.py` and
//! `pid.py` (commaai/openpilot, commit 02562a8e, the version DriveOS ported), in our
//! own code:
//!
//! * **States** `off`, `pid`, `stopping`, `starting` (`long_control_state_trans`):
//!   off while not active; pid once active; stopping when the car is nearly still and
//!   the plan wants to stop (or the driver brakes); starting when the plan moves
//!   again; back to pid once the output is no longer braking hard.
//! * **PI with feed-forward** on the speed error: `u = kp(v) e + i + kf a_target`,
//!   `e = v_target - v_ego`, gains scheduled by speed (linear interpolation between
//!   breakpoints, clamped at the ends, as `numpy.interp`).
//! * **Anti-windup** (`pid.py`): the integrator takes its next value only if that
//!   does not push an output already beyond a limit further out, or moves the
//!   integrator towards the error's sign; it is **frozen** while the driver brakes
//!   and when the car is about to stop (`prevent_overshoot`).
//! * **Stopping** lowers the output by `stopping_decel_rate / rate` per update down to
//!   the hold-still deceleration; **starting** releases the brake at
//!   `starting_accel_rate / rate` per update; both reset the integrator.
//! * **Output rate limit** (ours; OpenPilot leaves it to the car's interface): in pid
//!   the output moves at most `jerk_max / rate` per update; the output is clamped to
//!   `[accel_min, accel_max]` always.

/// A gain schedule: up to 3 (speed m/s, gain) breakpoints, speeds increasing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    pub n: usize,
    pub bp: [f32; 3],
    pub v: [f32; 3],
}

impl Schedule {
    /// A constant gain.
    pub fn constant(gain: f32) -> Schedule {
        Schedule {
            n: 1,
            bp: [0.0; 3],
            v: [gain, 0.0, 0.0],
        }
    }

    /// Breakpoints `bp` with gains `v` (equal lengths, 1 to 3, speeds increasing).
    pub fn new(bp: &[f32], v: &[f32]) -> Option<Schedule> {
        let n = bp.len();
        if n == 0 || n > 3 || v.len() != n || bp.windows(2).any(|w| w[0] >= w[1]) {
            return None;
        }
        if !bp.iter().chain(v).all(|x| x.is_finite()) || v.iter().any(|&g| g < 0.0) {
            return None;
        }
        let mut s = Schedule {
            n,
            bp: [0.0; 3],
            v: [0.0; 3],
        };
        s.bp[..n].copy_from_slice(bp);
        s.v[..n].copy_from_slice(v);
        Some(s)
    }

    /// The gain at `speed` (linear between breakpoints, the end values outside).
    pub fn at(&self, speed: f32) -> f32 {
        let (bp, v) = (&self.bp[..self.n], &self.v[..self.n]);
        if speed <= bp[0] {
            return v[0];
        }
        for k in 1..self.n {
            if speed <= bp[k] {
                let t = (speed - bp[k - 1]) / (bp[k] - bp[k - 1]);
                return v[k - 1] + t * (v[k] - v[k - 1]);
            }
        }
        v[self.n - 1]
    }
}

/// What INIT sets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub kp: Schedule,
    pub ki: Schedule,
    pub kf: f32,
    /// Output limits, m/s^2 (`accel_min < 0 < accel_max`).
    pub accel_min: f32,
    pub accel_max: f32,
    /// Output rate limit in pid, m/s^3.
    pub jerk_max: f32,
    /// UPDATE rate, Hz (the integrator's and the rate limits' time step is 1 / rate).
    pub rate_hz: f32,
    /// Stopping: braking ramps down at this rate, m/s^3, to `-stop_accel`.
    pub stopping_decel_rate: f32,
    pub stop_accel: f32,
    /// Starting: the brake is released at this rate, m/s^3.
    pub starting_accel_rate: f32,
}

impl Params {
    /// OpenPilot's Toyota RAV4 tuning (`selfdrive/car/toyota/interface.py` of that
    /// time: kpBP [0, 5, 35] kpV [3.6, 2.4, 1.5], kiBP [0, 35] kiV [0.54, 0.36]), its
    /// ISO 15622 limits (-3.5, 2.0 m/s^2), RATE 100 Hz, stoppingDecelRate 0.8,
    /// startingAccelRate 3.2, DECEL_STOPPING_TARGET 2.0; jerk 5 m/s^3 (ours).
    pub fn rav4() -> Params {
        Params {
            kp: Schedule::new(&[0.0, 5.0, 35.0], &[3.6, 2.4, 1.5]).expect("valid"),
            ki: Schedule::new(&[0.0, 35.0], &[0.54, 0.36]).expect("valid"),
            kf: 1.0,
            accel_min: -3.5,
            accel_max: 2.0,
            jerk_max: 5.0,
            rate_hz: 100.0,
            stopping_decel_rate: 0.8,
            stop_accel: 2.0,
            starting_accel_rate: 3.2,
        }
    }

    /// Why these parameters cannot be used, if they cannot.
    pub fn check(&self) -> Result<(), &'static str> {
        let scalars = [
            self.kf,
            self.accel_min,
            self.accel_max,
            self.jerk_max,
            self.rate_hz,
            self.stopping_decel_rate,
            self.stop_accel,
            self.starting_accel_rate,
        ];
        if !scalars.iter().all(|x| x.is_finite()) {
            return Err("a parameter is not a finite number");
        }
        if !(self.accel_min < 0.0 && self.accel_max > 0.0) {
            return Err("limits must satisfy accel_min < 0 < accel_max");
        }
        if self.rate_hz <= 0.0 || self.jerk_max <= 0.0 || self.kf < 0.0 {
            return Err("rate and jerk limit must be positive, kf not negative");
        }
        if self.stopping_decel_rate <= 0.0
            || self.starting_accel_rate <= 0.0
            || self.stop_accel < 0.0
        {
            return Err("stopping and starting rates must be positive");
        }
        Ok(())
    }
}

/// OpenPilot's LongCtrlState.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Off = 0,
    Pid = 1,
    Stopping = 2,
    Starting = 3,
}

/// One UPDATE's input.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Input {
    /// Measured speed and acceleration.
    pub v_ego: f32,
    pub a_ego: f32,
    /// The plan: speed to track and its acceleration (the feed-forward).
    pub v_target: f32,
    pub a_target: f32,
    /// Cruise engaged.
    pub active: bool,
    /// The driver brakes / presses the accelerator (override).
    pub brake_pressed: bool,
    pub gas_pressed: bool,
}

/// One UPDATE's output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Output {
    /// Acceleration command, m/s^2.
    pub accel: f32,
    pub state: State,
    /// The proportional, integral and feed-forward terms.
    pub p: f32,
    pub i: f32,
    pub f: f32,
}

/// Below this speed (m/s) the car counts as stopping (OpenPilot STOPPING_EGO_SPEED).
pub const STOPPING_EGO_SPEED: f32 = 0.5;
/// A plan above this speed (m/s) starts the car (OpenPilot STARTING_TARGET_SPEED).
pub const STARTING_TARGET_SPEED: f32 = 0.5;
/// Starting hands over to pid once the output brakes less than this (m/s^2).
pub const DECEL_THRESHOLD_TO_PID: f32 = 0.8;

/// The controller.
#[derive(Debug, Clone)]
pub struct LongControl {
    params: Params,
    state: State,
    i: f32,
    last: f32,
}

impl LongControl {
    pub fn new(params: Params) -> LongControl {
        LongControl {
            params,
            state: State::Off,
            i: 0.0,
            last: 0.0,
        }
    }

    pub fn params(&self) -> &Params {
        &self.params
    }

    pub fn state(&self) -> State {
        self.state
    }

    /// The integrator's value.
    pub fn integrator(&self) -> f32 {
        self.i
    }

    /// RESET: clears the integrator and the output history (the state machine starts
    /// again from off).
    pub fn reset(&mut self) {
        self.i = 0.0;
        self.last = 0.0;
        self.state = State::Off;
    }

    /// One UPDATE.
    pub fn update(&mut self, x: &Input) -> Output {
        self.state = self.next_state(x);
        let dt = 1.0 / self.params.rate_hz;
        let (mut p, mut f) = (0.0, 0.0);
        let accel = match self.state {
            State::Off => {
                self.i = 0.0;
                0.0
            }
            _ if x.gas_pressed => {
                self.i = 0.0;
                0.0
            }
            State::Pid => {
                let out = self.pid(x, &mut p, &mut f);
                let step = self.params.jerk_max * dt;
                out.clamp(self.last - step, self.last + step)
            }
            State::Stopping => {
                self.i = 0.0;
                let mut out = self.last;
                if x.v_ego > 0.0 || out > -self.params.stop_accel {
                    out -= self.params.stopping_decel_rate * dt;
                }
                out.max(-self.params.stop_accel.max(0.0)).min(0.0)
            }
            State::Starting => {
                self.i = 0.0;
                let mut out = self.last;
                if out < -DECEL_THRESHOLD_TO_PID {
                    out += self.params.starting_accel_rate * dt;
                }
                out
            }
        };
        let accel = accel.clamp(self.params.accel_min, self.params.accel_max);
        self.last = accel;
        Output {
            accel,
            state: self.state,
            p,
            i: self.i,
            f,
        }
    }

    /// OpenPilot's `long_control_state_trans` (without cruise standstill).
    fn next_state(&self, x: &Input) -> State {
        let stopping =
            x.v_ego < STOPPING_EGO_SPEED && (x.v_target < STOPPING_EGO_SPEED || x.brake_pressed);
        let starting = x.v_target > STARTING_TARGET_SPEED && !x.brake_pressed;
        match self.state {
            _ if !x.active => State::Off,
            State::Off => State::Pid,
            State::Pid if stopping => State::Stopping,
            State::Stopping if starting => State::Starting,
            State::Starting if stopping => State::Stopping,
            State::Starting if self.last >= -DECEL_THRESHOLD_TO_PID => State::Pid,
            s => s,
        }
    }

    /// The PI step with feed-forward and anti-windup (OpenPilot `pid.py`).
    fn pid(&mut self, x: &Input, p: &mut f32, f: &mut f32) -> f32 {
        let k = &self.params;
        let speed = x.v_ego.max(0.0);
        let error = x.v_target - x.v_ego;
        // Toyota brakes more when it thinks the driver wants to stop: do not let the
        // integrator fight it, and do not accelerate (`prevent_overshoot`).
        let prevent_overshoot = x.v_ego < 1.5 && x.v_target < 0.7;
        let freeze = x.brake_pressed || prevent_overshoot;
        *p = k.kp.at(speed) * error;
        *f = k.kf * x.a_target;
        let i = self.i + error * k.ki.at(speed) / k.rate_hz;
        let control = *p + *f + i;
        let grows_ok = error >= 0.0 && (control <= k.accel_max || i < 0.0);
        let shrinks_ok = error <= 0.0 && (control >= k.accel_min || i > 0.0);
        if (grows_ok || shrinks_ok) && !freeze {
            self.i = i;
        }
        let out = *p + *f + self.i;
        match prevent_overshoot {
            true => out.min(0.0),
            false => out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain PI without rate limit or feed-forward: the cases below are then closed
    /// forms of a first-order loop.
    fn plain(kp: f32, ki: f32) -> Params {
        Params {
            kp: Schedule::constant(kp),
            ki: Schedule::constant(ki),
            kf: 1.0,
            accel_min: -3.5,
            accel_max: 2.0,
            jerk_max: 1e6,
            rate_hz: 100.0,
            stopping_decel_rate: 0.8,
            stop_accel: 2.0,
            starting_accel_rate: 3.2,
        }
    }

    fn cruise(v_ego: f32, v_target: f32) -> Input {
        Input {
            v_ego,
            v_target,
            active: true,
            ..Input::default()
        }
    }

    /// Simulates `steps` updates on an ideal actuator, v' = u + d (d: a constant
    /// disturbance such as drag), with dt = 1/100 s; returns the speeds.
    fn run(c: &mut LongControl, v0: f32, target: f32, d: f32, steps: usize) -> Vec<f32> {
        let mut v = v0;
        let mut out = Vec::new();
        for _ in 0..steps {
            let u = c.update(&cruise(v, target)).accel;
            v += (u + d) * 0.01;
            out.push(v);
        }
        out
    }

    #[test]
    fn schedules_interpolate_and_clamp_like_numpy_interp() {
        let s = Params::rav4().kp;
        assert_eq!(s.at(-1.0), 3.6);
        assert!((s.at(2.5) - 3.0).abs() < 1e-6); // halfway between 3.6 and 2.4
        assert!((s.at(20.0) - 1.95).abs() < 1e-6); // halfway between 2.4 and 1.5
        assert_eq!(s.at(50.0), 1.5);
        assert!(Schedule::new(&[5.0, 0.0], &[1.0, 1.0]).is_none());
        assert!(Schedule::new(&[0.0], &[f32::NAN]).is_none());
    }

    /// P only, kp = 1, a 0.5 m/s step: e_k = 0.5 (1 - kp dt)^k exactly (no
    /// saturation: kp e = 0.5 < accel_max), so after 1 s e = 0.5 * 0.99^100 = 0.183.
    #[test]
    fn p_step_response_is_the_first_order_closed_form() {
        let mut c = LongControl::new(plain(1.0, 0.0));
        let v = run(&mut c, 20.0, 20.5, 0.0, 100);
        let e = 20.5 - v[99];
        let expected = 0.5 * 0.99f32.powi(100);
        assert!((e - expected).abs() < 1e-4, "{e} vs {expected}");
        assert!((expected - 0.183).abs() < 1e-3);
    }

    /// A constant drag of -0.5 m/s^2: P alone settles where kp e = 0.5, e = 0.5 m/s
    /// (kp = 1); the integral term removes the offset (to < 0.01 m/s in 30 s: the
    /// slow pole of s^2 + kp s + ki with kp = 1, ki = 0.2 is -0.276/s, e^-8 ~ 3e-4).
    #[test]
    fn integral_action_removes_the_offset_p_alone_leaves() {
        let mut c = LongControl::new(plain(1.0, 0.0));
        let v = run(&mut c, 20.0, 20.0, -0.5, 3000);
        assert!((20.0 - v[2999] - 0.5).abs() < 0.01, "{}", v[2999]);
        let mut c = LongControl::new(plain(1.0, 0.2));
        let v = run(&mut c, 20.0, 20.0, -0.5, 3000);
        assert!((20.0 - v[2999]).abs() < 0.01, "{}", v[2999]);
        assert!((c.integrator() - 0.5).abs() < 0.01); // the integrator holds the drag
    }

    /// A 10 m/s step with kp = 1, ki = 0.5: the output saturates at accel_max = 2 for
    /// about 4 s. With anti-windup the integrator does not grow while saturated (it
    /// stays 0 until kp e < 2, i.e. e < 2 m/s), so the overshoot stays under 0.6 m/s;
    /// a naive integrator would have collected ki * integral of e over the
    /// saturation (~0.5 * 24 m = 12 m/s^2 of command) and overshoots by metres per
    /// second. Both are checked, so the test fails without the anti-windup rule.
    #[test]
    fn the_integrator_does_not_wind_up_while_saturated() {
        let mut c = LongControl::new(plain(1.0, 0.5));
        let mut v = 10.0f32;
        let mut peak = v;
        for _ in 0..3000 {
            let out = c.update(&cruise(v, 20.0));
            if 20.0 - v > 2.0 {
                assert_eq!(out.i, 0.0, "integrator moved while saturated at v = {v}");
                assert_eq!(out.accel, 2.0);
            }
            v += out.accel * 0.01;
            peak = peak.max(v);
        }
        assert!(peak - 20.0 < 0.6, "overshoot {}", peak - 20.0);
        assert!((v - 20.0).abs() < 0.05, "settles: {v}");
        // The same loop with a naive integrator (clamped output, free integral).
        let (mut v, mut i, mut naive_peak) = (10.0f32, 0.0f32, 10.0f32);
        for _ in 0..3000 {
            let e = 20.0 - v;
            i += 0.5 * e * 0.01;
            v += (e + i).clamp(-3.5, 2.0) * 0.01;
            naive_peak = naive_peak.max(v);
        }
        assert!(
            naive_peak - 20.0 > 2.0,
            "naive overshoot {}",
            naive_peak - 20.0
        );
    }

    #[test]
    fn the_integrator_freezes_while_the_driver_brakes() {
        let mut c = LongControl::new(plain(1.0, 0.5));
        run(&mut c, 20.0, 21.0, 0.0, 50);
        let before = c.integrator();
        assert!(before > 0.0);
        let mut x = cruise(20.0, 21.0);
        x.brake_pressed = true;
        for _ in 0..50 {
            assert_eq!(c.update(&x).i, before);
        }
    }

    /// jerk_max = 5 m/s^3 at 100 Hz: the output moves at most 0.05 m/s^2 per update,
    /// so a step that asks for 2 m/s^2 at once gets there in 40 updates.
    #[test]
    fn the_output_rate_is_limited() {
        let mut p = plain(1.0, 0.0);
        p.jerk_max = 5.0;
        let mut c = LongControl::new(p);
        let mut last = 0.0;
        let mut outs = Vec::new();
        for _ in 0..60 {
            let u = c.update(&cruise(20.0, 25.0)).accel;
            assert!((u - last).abs() <= 0.05 + 1e-6, "{last} -> {u}");
            last = u;
            outs.push(u);
        }
        assert!(
            (outs[38] - 1.95).abs() < 1e-4 && (outs[39] - 2.0).abs() < 1e-5,
            "{outs:?}"
        );
    }

    #[test]
    fn off_stopping_starting_and_back_to_pid() {
        let mut c = LongControl::new(Params::rav4());
        let mut x = cruise(0.3, 0.0);
        x.active = false;
        assert_eq!(c.update(&x).state, State::Off);
        assert_eq!(c.update(&x).accel, 0.0);
        x.active = true;
        assert_eq!(c.update(&x).state, State::Pid);
        // Nearly still and the plan stops: stopping, braking harder by 0.8/100 per
        // update down to -2.0 m/s^2.
        let first = c.update(&x);
        assert_eq!(first.state, State::Stopping);
        let mut out = first;
        for _ in 0..400 {
            out = c.update(&x);
            assert!(out.accel <= 0.0);
        }
        assert_eq!(out.accel, -2.0);
        assert_eq!(out.i, 0.0);
        // The plan moves: starting releases the brake at 3.2/100 per update, then pid.
        x.v_target = 1.0;
        let s = c.update(&x);
        assert_eq!(s.state, State::Starting);
        assert!((s.accel - (-2.0 + 0.032)).abs() < 1e-5, "{}", s.accel);
        let mut n = 1;
        while c.update(&x).state == State::Starting {
            n += 1;
            assert!(n < 100, "never back to pid");
        }
        // (2.0 - 0.8) / 0.032 = 37.5: 38 updates to brake less than 0.8 m/s^2.
        assert!((37..=40).contains(&n), "{n}");
    }

    #[test]
    fn gas_pressed_overrides_and_resets() {
        let mut c = LongControl::new(plain(1.0, 0.5));
        run(&mut c, 20.0, 21.0, 0.0, 50);
        let mut x = cruise(20.0, 21.0);
        x.gas_pressed = true;
        let out = c.update(&x);
        assert_eq!((out.accel, out.i), (0.0, 0.0));
    }

    #[test]
    fn bad_parameters_are_refused() {
        let mut p = Params::rav4();
        assert_eq!(p.check(), Ok(()));
        p.accel_min = 1.0;
        assert!(p.check().is_err());
        let mut p = Params::rav4();
        p.rate_hz = f32::INFINITY;
        assert!(p.check().is_err());
    }
}
