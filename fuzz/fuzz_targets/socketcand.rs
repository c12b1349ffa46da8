//! The socketcand protocol on arbitrary bytes, as the server reads a client's: commands
//! framed by `< >` and bounded, each parsed until the first error that would close the
//! connection; a `send` parsed is written back and parses to the same frame
//! (`bulkhead_can::socketcand::fuzz_commands`, built with `--cfg fuzzing`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    bulkhead_can::socketcand::fuzz_commands(data);
});
