//! Fuzzes channel header validation: any bytes and any file length must give
//! either a clean error or a layout that fits inside the file, never a panic.
//! Run: cd crates/chan/fuzz && cargo +nightly fuzz run header
#![no_main]

use bulkhead_chan::layout::{validate, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let file_len = u64::from_le_bytes(data[..8].try_into().unwrap());
    let header = &data[8..];
    if let Ok((meta, l)) = validate(header, file_len, 4096) {
        assert!(header.len() >= HEADER_LEN);
        assert!(l.total_len <= file_len);
        assert!(l.data_off + l.data_len <= l.total_len);
        assert!(l.writer_off + 4096 <= l.reader_off && l.reader_off + 4096 <= l.data_off);
        assert!(!meta.name.is_empty() && meta.msg_size > 0 && meta.depth > 0);
    }
});
