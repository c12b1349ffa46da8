//! An error about the node of a description at a key path, before its position is
//! known: what normalizing each section returns, the sections' own modules included
//! (they sit below `normalize`, which calls them).

/// An error or warning about the node at `path` (e.g. `windows[0].slices[1].cpu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathError {
    pub path: String,
    pub message: String,
}

pub type Result<T> = std::result::Result<T, PathError>;

pub fn err<T>(path: impl Into<String>, message: impl Into<String>) -> Result<T> {
    Err(PathError {
        path: path.into(),
        message: message.into(),
    })
}
