//! `bulkhead-app aml-write`, rt task L.

use super::{names, periodic, receiver, say, sender, R};
use crate::wire::{Actuation, UpdateOutput, SIZE};
use bulkhead_task::clock::now_ns;

/// L: the ADAS write mapper of the Linux side (the paper's AML, its writing half), an
/// rt task (Table 3: 0.1 ms every 1 ms): every job, the controller's outputs of
/// channel 8; the newest as the acceleration command to channel 4. Notes each
/// output's round trip (K's send -> read here) and the UPDATEs never answered (gaps
/// in the sequence).
pub fn run() -> R<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
