//! The validation of a mapped channel's header (`layout::validate`), which a process
//! runs on bytes its peer may have written. Two inputs per run: the bytes as they come
//! (the first 8 give the file length), and a valid header with the bytes XORed into it,
//! so that the fuzzer reaches the checks behind the magic and version.
#![no_main]

use bulkhead_chan::layout::{self, Layout, HEADER_LEN};
use bulkhead_chan::{Kind, Meta, Overflow};
use libfuzzer_sys::fuzz_target;

const PAGE: u64 = 4096;

fn valid_header() -> ([u8; HEADER_LEN], u64) {
    let meta = Meta {
        name: "fuzz".into(),
        kind: Kind::Fifo,
        msg_size: 8,
        depth: 10,
        overflow: Overflow::Block,
        creator_pid: 1,
        creator_start: 2,
    };
    let l = Layout::compute(meta.kind, meta.msg_size, meta.depth, PAGE).expect("a valid layout");
    (layout::encode(&meta, &l), l.total_len)
}

fuzz_target!(|data: &[u8]| {
    let (len_bytes, rest) = data.split_at(data.len().min(8));
    let mut len = [0u8; 8];
    len[..len_bytes.len()].copy_from_slice(len_bytes);
    let file_len = u64::from_le_bytes(len);
    let _ = layout::validate(rest, file_len, PAGE);

    let (mut header, total_len) = valid_header();
    for (h, d) in header.iter_mut().zip(rest) {
        *h ^= d;
    }
    if let Ok((meta, l)) = layout::validate(&header, file_len ^ total_len, PAGE) {
        // What validates describes itself: encoding it again validates the same way.
        let again = layout::encode(&meta, &l);
        assert_eq!(layout::validate(&again, l.total_len, PAGE).ok(), Some((meta, l)));
    }
});
