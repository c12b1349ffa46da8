//! The DBC loader on arbitrary bytes (as `can decode --dbc` reads them: lossy UTF-8),
//! lenient and strict.
#![no_main]

use bulkhead_can::Database;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = Database::parse_with(&text, false);
    let _ = Database::parse_with(&text, true);
});
