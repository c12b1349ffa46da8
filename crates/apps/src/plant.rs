//! The vehicle plant: longitudinal dynamics of a car on a road (what CARLA was in
//! DriveOS's hardware-in-the-loop setup, section 6.1).
//!
//! `m dv/dt = F - 1/2 rho Cd A v^2 - Crr m g cos(theta) - m g sin(theta)` with the
//! wheel force `F` following the commanded acceleration through a first-order lag
//! (the powertrain's and brakes' response, time constant `lag_s`): the requested
//! force `m a_cmd` is split into drive (limited by `drive_max_n` and by the engine
//! power `power_max_w / v`) and brake (limited by `brake_max_n`). Braking and rolling
//! resistance never push the car backwards: at standstill the speed stays 0.
//! Defaults are a 2018 Toyota RAV4 (1,700 kg with driver, Cd 0.33, frontal area
//! 2.6 m^2, 132 kW) on dry asphalt (Crr 0.012).

/// The car and the road.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Car {
    pub mass_kg: f64,
    pub drag_cd_a: f64,
    pub rho: f64,
    pub crr: f64,
    pub drive_max_n: f64,
    pub power_max_w: f64,
    pub brake_max_n: f64,
    pub lag_s: f64,
    /// Road grade, radians (positive uphill).
    pub grade_rad: f64,
}

pub const G: f64 = 9.81;

impl Default for Car {
    fn default() -> Car {
        Car {
            mass_kg: 1700.0,
            drag_cd_a: 0.33 * 2.6,
            rho: 1.225,
            crr: 0.012,
            drive_max_n: 6000.0,
            power_max_w: 132_000.0,
            brake_max_n: 15_000.0,
            lag_s: 0.3,
            grade_rad: 0.0,
        }
    }
}

/// The car's state.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Plant {
    pub car: Car,
    /// Speed, m/s (>= 0).
    pub v: f64,
    /// Wheel force after the lag, N (positive drives, negative brakes).
    pub force: f64,
    /// Acceleration of the last step, m/s^2.
    pub a: f64,
}

impl Plant {
    pub fn new(car: Car, v0: f64) -> Plant {
        Plant {
            car,
            v: v0.max(0.0),
            force: 0.0,
            a: 0.0,
        }
    }

    /// The resistances at speed `v`, N (drag, rolling, grade).
    pub fn resistance(&self, v: f64) -> f64 {
        let c = &self.car;
        let drag = 0.5 * c.rho * c.drag_cd_a * v * v;
        let rolling = if v > 0.0 {
            c.crr * c.mass_kg * G * c.grade_rad.cos()
        } else {
            0.0
        };
        drag + rolling + c.mass_kg * G * c.grade_rad.sin()
    }

    /// The wheel force the powertrain and brakes can give for command `a_cmd`.
    pub fn force_limit(&self, a_cmd: f64) -> f64 {
        let c = &self.car;
        let wanted = c.mass_kg * a_cmd;
        if wanted >= 0.0 {
            let power_limited = c.power_max_w / self.v.max(1.0);
            wanted.min(c.drive_max_n).min(power_limited)
        } else {
            wanted.max(-c.brake_max_n)
        }
    }

    /// Advances `dt` seconds under acceleration command `a_cmd` (explicit Euler).
    pub fn step(&mut self, a_cmd: f64, dt: f64) {
        let target = self.force_limit(a_cmd);
        self.force += (target - self.force) * (dt / self.car.lag_s).min(1.0);
        let net = self.force - self.resistance(self.v);
        let mut a = net / self.car.mass_kg;
        if self.v <= 0.0 && self.force <= 0.0 {
            // Standing, braking or coasting: held still (brakes and friction are
            // reactions, they do not reverse the car); a grade steeper than the
            // brakes hold is outside this model.
            a = a.max(0.0);
        }
        let v = (self.v + a * dt).max(0.0);
        self.a = (v - self.v) / dt;
        self.v = v;
    }

    /// Drive pedal 0-100 % (the share of the drive force limit in use).
    pub fn gas_pct(&self) -> f64 {
        (100.0 * self.force.max(0.0) / self.car.drive_max_n).min(100.0)
    }

    /// Brake pressure in BRAKE_MODULE's raw units (0..4047 for 0..brake_max_n).
    pub fn brake_pressure(&self) -> f64 {
        (4047.0 * (-self.force).max(0.0) / self.car.brake_max_n)
            .round()
            .min(4047.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settle(p: &mut Plant, a: f64, secs: f64) {
        for _ in 0..(secs * 1000.0) as usize {
            p.step(a, 0.001);
        }
    }

    /// Coasting from 25 m/s: the initial deceleration is the resistances over the
    /// mass: (0.5 * 1.225 * 0.858 * 625 + 0.012 * 1700 * 9.81) / 1700 = 0.311 m/s^2.
    #[test]
    fn coasting_decelerates_by_drag_and_rolling_resistance() {
        let mut p = Plant::new(Car::default(), 25.0);
        p.step(0.0, 0.001);
        assert!((p.a + 0.311).abs() < 0.002, "{}", p.a);
    }

    /// A command of a holds the speed's derivative at a minus the resistances once the
    /// lag has passed; drive force is capped by the power: at 30 m/s, 132 kW / 30 =
    /// 4400 N = 2.59 m/s^2 before resistances.
    #[test]
    fn drive_and_brake_limits() {
        let mut p = Plant::new(Car::default(), 30.0);
        assert!((p.force_limit(5.0) - 4400.0).abs() < 1e-9);
        assert_eq!(p.force_limit(-20.0), -15_000.0);
        settle(&mut p, -3.0, 2.0);
        let expected = -3.0 - p.resistance(p.v) / 1700.0;
        assert!((p.a - expected).abs() < 0.01, "{} vs {expected}", p.a);
    }

    #[test]
    fn braking_stops_the_car_and_it_stays_stopped() {
        let mut p = Plant::new(Car::default(), 5.0);
        settle(&mut p, -3.0, 5.0);
        assert_eq!(p.v, 0.0);
        settle(&mut p, -3.0, 1.0);
        assert_eq!(p.v, 0.0);
        assert!(p.brake_pressure() > 0.0 && p.gas_pct() == 0.0);
    }

    /// Uphill at 5 % (2.86 degrees) coasting loses g sin(theta) = 0.49 m/s^2 more.
    #[test]
    fn grade_pulls_the_car_back() {
        let flat = {
            let mut p = Plant::new(Car::default(), 20.0);
            p.step(0.0, 0.001);
            p.a
        };
        let car = Car {
            grade_rad: 0.05f64.atan(),
            ..Car::default()
        };
        let mut p = Plant::new(car, 20.0);
        p.step(0.0, 0.001);
        assert!((flat - p.a - 0.489).abs() < 0.003, "{}", flat - p.a);
    }
}
