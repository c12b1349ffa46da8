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

/// How many messages of a declared `fifo` its reading task takes per job (`reads:`):
/// what the reader's program does, which `sim` follows and `run` cannot see. One by
/// default; `all` for a reader that drains the channel each job, as a gateway or a
/// polling mapper does (DriveOS's mappers read every frame of a period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reads {
    /// At most this many (at least 1).
    Count(u32),
    /// Every message there at the job's start.
    All,
}

impl Reads {
    /// The default, one message a job.
    pub const ONE: Reads = Reads::Count(1);

    /// The most messages a job takes.
    pub fn most(self) -> u32 {
        match self {
            Reads::Count(n) => n,
            Reads::All => u32::MAX,
        }
    }
}

impl Default for Reads {
    fn default() -> Reads {
        Reads::ONE
    }
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
