//! The cruise scenario: the driver's set speed over time (piecewise constant) and a
//! lead car's speed over time (piecewise linear), with the planner that turns them
//! into the controller's target (OpenPilot's longitudinal planner, reduced to a
//! speed ramp and a time-gap follower).

/// Points `(t_s, value)` sorted by time.
#[derive(Debug, Clone, PartialEq)]
pub struct Series(pub Vec<(f64, f64)>);

impl Series {
    /// Parses `VALUE@SECONDS,...` (`72@0,90@2`; a bare `VALUE` is `VALUE@0`).
    pub fn parse(text: &str) -> Result<Series, String> {
        let mut points = Vec::new();
        for item in text.split(',').map(str::trim) {
            let (v, t) = item.split_once('@').unwrap_or((item, "0"));
            let t = t.trim().trim_end_matches('s');
            let bad = || format!("`{item}`: want VALUE@SECONDS, e.g. 90@2");
            let (v, t): (f64, f64) = (
                v.trim().parse().map_err(|_| bad())?,
                t.parse().map_err(|_| bad())?,
            );
            if !v.is_finite() || !t.is_finite() || t < 0.0 {
                return Err(bad());
            }
            if points.last().is_some_and(|&(last, _)| t <= last) {
                return Err(format!("`{item}`: times must increase"));
            }
            points.push((t, v));
        }
        Ok(Series(points))
    }

    /// The value in force at `t` (the last point at or before `t`; the first before it).
    pub fn step_at(&self, t: f64) -> f64 {
        self.0
            .iter()
            .rev()
            .find(|p| p.0 <= t)
            .unwrap_or(&self.0[0])
            .1
    }

    /// Linear interpolation between points, the end values outside.
    pub fn linear_at(&self, t: f64) -> f64 {
        let p = &self.0;
        if t <= p[0].0 {
            return p[0].1;
        }
        for w in p.windows(2) {
            if t <= w[1].0 {
                return w[0].1 + (t - w[0].0) / (w[1].0 - w[0].0) * (w[1].1 - w[0].1);
            }
        }
        p[p.len() - 1].1
    }
}

/// The planner's limits: how fast the target speed may rise and fall (m/s^2), and the
/// time gap kept to a lead car (s) plus a standstill distance (m).
pub const ACCEL_UP: f64 = 1.5;
pub const ACCEL_DOWN: f64 = 3.0;
pub const TIME_GAP: f64 = 1.8;
pub const STANDSTILL_GAP: f64 = 5.0;

/// The cruise scenario and the lead car it tracks.
#[derive(Debug, Clone)]
pub struct Planner {
    /// Set speed, km/h.
    pub set_kmh: Series,
    /// Lead car speed, km/h, and its initial gap, m (None: no lead car).
    pub lead: Option<(Series, f64)>,
    gap: f64,
    v_plan: f64,
    started: bool,
}

/// The planner's output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    pub v_target: f64,
    pub a_target: f64,
    pub set: f64,
    /// Distance to the lead car, m (f64::INFINITY without one).
    pub gap: f64,
}

impl Planner {
    pub fn new(set_kmh: Series, lead: Option<(Series, f64)>) -> Planner {
        let gap = lead.as_ref().map_or(f64::INFINITY, |l| l.1);
        Planner {
            set_kmh,
            lead,
            gap,
            v_plan: 0.0,
            started: false,
        }
    }

    /// The plan at time `t` (s since the start) for measured speed `v_ego` (m/s),
    /// `dt` after the previous call.
    pub fn update(&mut self, t: f64, v_ego: f64, dt: f64) -> Plan {
        if !self.started {
            self.v_plan = v_ego;
            self.started = true;
        }
        let set = self.set_kmh.step_at(t) / 3.6;
        let mut wanted = set;
        if let Some((lead, _)) = &self.lead {
            let v_lead = lead.linear_at(t) / 3.6;
            self.gap += (v_lead - v_ego) * dt;
            // Speed that closes the gap to the desired one in 2 s.
            let desired = STANDSTILL_GAP + TIME_GAP * v_ego;
            wanted = wanted.min((v_lead + (self.gap - desired) / 2.0).max(0.0));
        }
        let step = (wanted - self.v_plan).clamp(-ACCEL_DOWN * dt, ACCEL_UP * dt);
        self.v_plan += step;
        Plan {
            v_target: self.v_plan,
            a_target: if dt > 0.0 { step / dt } else { 0.0 },
            set,
            gap: self.gap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_parse_and_evaluate() {
        let s = Series::parse("72@0,90@2s").unwrap();
        assert_eq!(
            (s.step_at(1.9), s.step_at(2.0), s.linear_at(1.0)),
            (72.0, 90.0, 81.0)
        );
        assert!(Series::parse("72@2,90@1").is_err());
        assert!(Series::parse("fast").is_err());
        assert_eq!(Series::parse("50").unwrap().step_at(9.0), 50.0);
    }

    /// A 5 m/s step of the set speed is ramped at 1.5 m/s^2: 3.33 s.
    #[test]
    fn the_target_ramps_to_the_set_speed() {
        let mut p = Planner::new(Series::parse("72@0,90@1").unwrap(), None);
        let mut v = 20.0;
        let mut reached = None;
        for k in 0..1000 {
            let t = k as f64 * 0.01;
            let plan = p.update(t, v, 0.01);
            v = plan.v_target;
            if reached.is_none() && (plan.v_target - 25.0).abs() < 1e-9 {
                reached = Some(t);
            }
        }
        let reached = reached.unwrap();
        assert!((reached - (1.0 + 5.0 / 1.5)).abs() < 0.02, "{reached}");
    }

    /// A lead car slowing from 90 to 54 km/h: the follower ends at the lead's speed
    /// and the desired gap (5 + 1.8 * 15 = 32 m).
    #[test]
    fn the_follower_keeps_the_time_gap() {
        let lead = Series::parse("90@0,90@2,54@6").unwrap();
        let mut p = Planner::new(Series::parse("90").unwrap(), Some((lead, 50.0)));
        let mut v = 25.0;
        let mut plan = p.update(0.0, v, 0.0);
        for k in 1..6000 {
            plan = p.update(k as f64 * 0.01, v, 0.01);
            v = plan.v_target;
        }
        assert!((v - 15.0).abs() < 0.05, "{v}");
        assert!((plan.gap - 32.0).abs() < 0.5, "{}", plan.gap);
    }
}
