//! Names bulkhead makes for the file system from a description's words (partition
//! names, the description's file name): cgroup directories, control sockets.

/// `text` with letters, digits, `-`, `_` and `.` kept and anything else replaced by `_`:
/// a name that is one path component and needs no quoting.
pub fn safe_name(text: &str) -> String {
    let keep = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
    text.chars()
        .map(|c| if keep(c) { c } else { '_' })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_letters_digits_dashes_underscores_and_dots_are_kept() {
        assert_eq!(
            safe_name("my car/ä x.1-2_3"),
            "my_car___x.1-2_3",
            "one `_` per character"
        );
        assert_eq!(safe_name("ok"), "ok");
    }
}
