//! The controller pipeline's end-to-end delay (DriveOS 7.2: a frame on the bus ->
//! A, B, E, K, G, L, F, H, A -> the command frame on the bus), measured by the plant:
//! it tags each SPEED frame (SPEED.ENCODER, 8 bits), the tag travels with the reading
//! through every stage, and the ADAS write mapper puts it into the ACC_CONTROL frame
//! it causes (ACC_CONTROL.ITS_CONNECT_LEAD). A SPEED frame's delay is the bus time of
//! the first ACC_CONTROL frame carrying its tag minus the time it was sent; a tag is
//! reused after 256 SPEED frames (6 s at 41.45 Hz), far beyond any delay measured.

/// Delays so far, ns.
#[derive(Debug, Clone)]
pub struct Delays {
    sent: Box<[Option<u64>; 256]>,
    pub delays: Vec<u64>,
}

impl Default for Delays {
    fn default() -> Self {
        Delays {
            sent: Box::new([None; 256]),
            delays: Vec::new(),
        }
    }
}

/// The industry's expectation for sensing to actuation (DriveOS 6.3, 7.2): 10 ms.
pub const EXPECTED_NS: u64 = 10_000_000;

impl Delays {
    /// A SPEED frame with `tag` went out at `t_ns`.
    pub fn sent(&mut self, tag: u8, t_ns: u64) {
        self.sent[usize::from(tag)] = Some(t_ns);
    }

    /// An ACC_CONTROL frame with `tag` was on the bus at `t_ns`: the first one for
    /// the tag's frame counts.
    pub fn answered(&mut self, tag: u8, t_ns: u64) {
        if let Some(t0) = self.sent[usize::from(tag)].take() {
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
        format!(
            "pipeline: {} frames, delay min {:.2} mean {mean:.2} p99 {:.2} max {:.2} ms, {:.1}% above 10 ms",
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
    fn the_first_answer_of_a_tag_counts_once() {
        let mut d = Delays::default();
        d.sent(7, 1_000);
        d.answered(8, 2_000); // no frame with tag 8 outstanding
        d.answered(7, 3_000_000);
        d.answered(7, 4_000_000); // a later command for the same reading
        d.sent(9, 10);
        d.answered(9, 12_000_010);
        assert_eq!(d.delays, vec![2_999_000, 12_000_000]);
        let s = d.summary();
        assert!(s.starts_with("pipeline: 2 frames, delay min 3.00 mean 7.50 p99 12.00 max 12.00 ms, 50.0% above 10 ms"), "{s}");
    }
}
