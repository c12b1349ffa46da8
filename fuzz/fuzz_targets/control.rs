//! The control socket's protocol on arbitrary bytes, as the server and the client read
//! them: the bytes cut into lines of at most MAX_REQUEST (in two pieces, as they may
//! arrive), each line parsed as a request (a request parsed, written as a line, parses
//! back to itself; an error is a reply that serializes), and the bytes read as a reply.
#![no_main]

use bulkhead_control::lines::{Line, LineBuffer};
use bulkhead_control::{RequestLine, Response, MAX_REQUEST};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut buffer = LineBuffer::new(MAX_REQUEST);
    let mut lines = Vec::new();
    let cut = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    buffer.push(&data[..cut], &mut lines);
    buffer.push(&data[cut..], &mut lines);
    assert!(buffer.pending() <= MAX_REQUEST);
    for line in lines {
        let Line::Text(text) = line else { continue };
        match RequestLine::parse(&text) {
            Ok(request) => {
                let again = RequestLine::parse(request.to_line().trim_end());
                assert_eq!(again.as_ref(), Ok(&request), "{text}");
            }
            Err(reply) => assert!(!reply.ok && reply.to_line().ends_with('\n')),
        }
    }
    let _ = serde_json::from_slice::<Response>(data);
});
