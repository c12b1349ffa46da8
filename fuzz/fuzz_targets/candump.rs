//! The candump log reader on arbitrary bytes: every record or error of the input, and
//! each parsed record printed and parsed again to the same record.
#![no_main]

use bulkhead_can::candump::{parse_line, Reader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for (i, item) in Reader::new(data).enumerate() {
        if let Ok(record) = item {
            let again = parse_line(&record.to_string(), i + 1);
            // Printing keeps microseconds only: compare with the timestamp cut to them.
            let mut expected = record.clone();
            expected.t_ns -= expected.t_ns % 1_000;
            assert_eq!(again.as_ref(), Ok(&expected), "{record}");
        }
    }
});
