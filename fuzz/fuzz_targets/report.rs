//! `bulkhead report`'s reader on arbitrary bytes: the format recognized, then the
//! schedule log or the Perfetto trace read into the figures and the Gantt chart, which
//! serialize. Any result is fine; a panic, a hang or unbounded memory is a bug.
//!
//! The reader lives in the `bulkhead` binary (crates/cli/src/report), which no crate
//! can depend on: its two files are compiled into this target as they are, and what
//! only the binary uses is allowed to go unused here.
#![no_main]
#![allow(dead_code)]

#[path = "../../crates/cli/src/report/model.rs"]
mod model;
#[path = "../../crates/cli/src/report/read.rs"]
mod read;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(format) = read::detect(data) else {
        return;
    };
    let mut builder = model::Builder::default();
    let read = match format {
        read::Format::ScheduleLog => read::schedule_log(data, &mut builder),
        read::Format::Perfetto => read::perfetto(data, &mut builder),
    };
    if read.is_ok() {
        let source = model::Source {
            file: "fuzz".into(),
            format: format.name(),
            bulkhead: bulkhead_trace::perfetto::VERSION,
        };
        let (figures, gantt) = builder.finish(source);
        serde_json::to_string(&figures).expect("figures serialize");
        serde_json::to_string(&gantt).expect("the chart serializes");
    }
});
