//! The controller pipeline's end-to-end delay (DriveOS 7.2: a frame on the bus ->
//! A, B, E, K, G, L, F, H, A -> the command frame on the bus), measured by the plant:
//! it tags each SPEED frame (SPEED.ENCODER, 8 bits), the tag travels with the reading
//! through every stage, and the ADAS write mapper puts it into the ACC_CONTROL frame
//! it causes (ACC_CONTROL.ITS_CONNECT_LEAD).
//!
//! A SPEED frame's delay is the bus time of the first ACC_CONTROL frame carrying its
//! tag or a newer one minus the time it was sent: the time until an actuation based
//! on this reading or a fresher one is on the bus. A reading a stage skipped (the
//! read mapper's channel to the ADAS mapper keeps only the newest) is answered by the
//! newer reading's command, so a stalled stage delays every reading it held up
//! rather than hiding them. A tag names the newest SPEED frame sent with it: tags
//! repeat after 256 frames (6 s at the real 41.45 Hz, 0.5 s at the benchmark's
//! 500 Hz), so a command more than 256 frames late is taken for a newer frame's; such
//! answers are counted ([`Delays::wrapped`]). Frames sent before the first command
//! came back (the pipeline was not yet running) are not counted.

use std::collections::VecDeque;

/// Delays so far, ns.
#[derive(Debug, Clone, Default)]
pub struct Delays {
    /// Frames sent and not yet answered: (number, send time).
    outstanding: VecDeque<(u64, u64)>,
    /// Frames sent so far (the next frame's number).
    sent: u64,
    started: bool,
    pub delays: Vec<u64>,
    /// Answers that resolved a frame sent 256 frames or more before the one its tag
    /// names (the tag may have been that older frame's).
    pub wrapped: u64,
}

/// The industry's expectation for sensing to actuation (DriveOS 6.3, 7.2): 10 ms.
pub const EXPECTED_NS: u64 = 10_000_000;

/// Frames kept waiting for the pipeline's first answer.
const BEFORE_START: usize = 256;

impl Delays {
    /// A SPEED frame goes out at `t_ns`: its tag.
    pub fn send(&mut self, t_ns: u64) -> u8 {
        let n = self.sent;
        self.sent += 1;
        self.outstanding.push_back((n, t_ns));
        if !self.started && self.outstanding.len() > BEFORE_START {
            self.outstanding.pop_front();
        }
        n as u8
    }

    /// An ACC_CONTROL frame with `tag` was on the bus at `t_ns`: it answers the newest
    /// frame sent with that tag and every frame before it still waiting.
    pub fn answered(&mut self, tag: u8, t_ns: u64) {
        let Some(last) = self.sent.checked_sub(1) else {
            return;
        };
        let Some(n) = last.checked_sub(u64::from((last as u8).wrapping_sub(tag))) else {
            return;
        };
        if !self.started {
            self.started = true;
            self.outstanding.retain(|&(k, _)| k >= n);
        }
        while let Some(&(k, t0)) = self.outstanding.front() {
            if k > n {
                break;
            }
            self.outstanding.pop_front();
            if n - k >= 256 {
                self.wrapped += 1;
            }
            if t_ns >= t0 {
                self.delays.push(t_ns - t0);
            }
        }
    }

    /// `n, min, mean, p99, max` (ms) and the share above 10 ms.
    pub fn summary(&self) -> String {
        let mut d = self.delays.clone();
        if d.is_empty() {
            return "pipeline: no frame answered yet".into();
        }
        d.sort_unstable();
        let ms = |ns: u64| ns as f64 / 1e6;
        let p99 = d[((d.len() - 1) as f64 * 0.99).round() as usize];
        let mean = d.iter().sum::<u64>() as f64 / d.len() as f64 / 1e6;
        let over = d.iter().filter(|&&x| x > EXPECTED_NS).count();
        let wrapped = match self.wrapped {
            0 => String::new(),
            w => format!(", {w} answers after a tag wrapped"),
        };
        format!(
            "pipeline: {} frames, delay min {:.2} mean {mean:.2} p99 {:.2} max {:.2} ms, {:.1}% above 10 ms{wrapped}",
            d.len(),
            ms(d[0]),
            ms(p99),
            ms(d[d.len() - 1]),
            100.0 * over as f64 / d.len() as f64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_resolves_its_frame_and_every_older_one_waiting() {
        let mut d = Delays::default();
        d.answered(0, 5); // nothing sent yet
        assert_eq!(d.send(1_000), 0); // before the pipeline runs: not counted
        assert_eq!(d.send(2_000), 1);
        d.answered(1, 3_000_000); // the first answer: frame 1 alone
        assert_eq!(d.delays, vec![2_998_000]);
        d.answered(1, 4_000_000); // a later command for the same reading
        assert_eq!(d.delays.len(), 1);
        for k in 2..5 {
            assert_eq!(d.send(k * 1_000_000), k as u8);
        }
        // Frame 3's answer: frames 2 and 3 (2 was skipped); 4 still waits.
        d.answered(3, 14_000_000);
        assert_eq!(d.delays, vec![2_998_000, 12_000_000, 11_000_000]);
        let s = d.summary();
        assert!(s.starts_with("pipeline: 3 frames, delay min 3.00 mean 8.67 p99 12.00 max 12.00 ms, 66.7% above 10 ms"), "{s}");
        assert_eq!(d.wrapped, 0);
    }

    #[test]
    fn tags_wrap_after_256_frames_and_late_answers_are_counted() {
        let mut d = Delays::default();
        d.send(0);
        d.answered(0, 10);
        for k in 1..=300u64 {
            d.send(k * 2_000_000);
        }
        // Tag 44 names frame 300 (300 mod 256): frames 1..=300 are answered; frames
        // 1..=44 were sent 256 or more frames before it.
        d.answered(44, 700_000_000);
        assert_eq!(d.delays.len(), 301);
        assert_eq!(d.wrapped, 44);
        assert_eq!(d.delays[300], 100_000_000);
    }
}
