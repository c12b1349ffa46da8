//! How a channel buffers messages and what a write to a full one does: the words a
//! channel and a pipeline share.

/// Buffering semantics of a channel (Boomerang II-B, DriveOS 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChannelKind {
    /// Lossless single-producer single-consumer ring.
    Fifo,
    /// Simpson's four-slot: the reader gets the latest complete message.
    Latest,
}

/// What a write to a full `fifo` does (`overflow:` of a channel or a pipeline): the
/// one rule both `sim` and `run` apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overflow {
    /// The writer waits for room (Boomerang III-B, `RT_FIFO`: "the sender must block
    /// when the buffer is full"); nothing is lost at the buffer.
    #[default]
    Block,
    /// The new message is dropped (and counted lost).
    DropNewest,
    /// The oldest unread message is dropped to make room (and counted lost).
    DropOldest,
}

impl Overflow {
    /// The name as written in a description.
    pub fn name(self) -> &'static str {
        match self {
            Overflow::Block => "block",
            Overflow::DropNewest => "drop_newest",
            Overflow::DropOldest => "drop_oldest",
        }
    }
}
