//! Partition identities: `user:` names an account of this machine or a uid, and
//! `system.user_range` the uids bulkhead allocates to partitions without one. Accounts
//! are a fact of the machine the description is checked on (read through the C library's name service, `getpwnam_r`).

use nix::unistd::{Gid, Group, Uid, User};
use std::ffi::CString;

/// `(uid_t)-1`: `setuid` reads it as "leave unchanged", so it is never an identity.
const NO_UID: u32 = u32::MAX;

/// Why a `user:` names no identity of this machine, or a `user_range` no uids.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserError {
    #[error("{} is not a uid (setuid reads (uid_t)-1 as `no change`)", NO_UID)]
    NoChange,
    #[error("user `{user}`: NUL byte")]
    Nul {
        user: String,
        #[source]
        source: std::ffi::NulError,
    },
    #[error("no user `{0}` on this machine")]
    Unknown(String),
    #[error("user `{user}`: the account lookup failed: {errno}")]
    Lookup {
        user: String,
        errno: nix::errno::Errno,
    },
    #[error("`{0}` is not a uid range FIRST-LAST (e.g. 61184-65519)")]
    NotARange(String),
    #[error("`{0}`: FIRST must be at least 1 and at most LAST, LAST below {max}", max = NO_UID)]
    BadRange(String),
}

/// uid and primary gid of `user`: a user name, or a numeric uid (its gid is the
/// account's if it has one, else the same number).
pub fn resolve(user: &str) -> Result<(u32, u32), UserError> {
    let numeric = user.parse::<u32>().ok();
    if numeric == Some(NO_UID) {
        return Err(UserError::NoChange);
    }
    let entry = match numeric {
        Some(uid) => User::from_uid(Uid::from_raw(uid)),
        None => {
            CString::new(user).map_err(|source| UserError::Nul {
                user: user.into(),
                source,
            })?;
            User::from_name(user)
        }
    }
    .map_err(|errno| UserError::Lookup {
        user: user.into(),
        errno,
    })?;
    match (entry, numeric) {
        (Some(account), _) => Ok((account.uid.as_raw(), account.gid.as_raw())),
        (None, Some(uid)) => Ok((uid, uid)),
        (None, None) => Err(UserError::Unknown(user.into())),
    }
}

/// Whether `user` can be resolved on this machine (see [`resolve`]).
pub fn check(user: &str) -> Result<(), UserError> {
    resolve(user).map(|_| ())
}

/// Whether `uid` names an account or a group of this machine. A lookup that fails
/// (the name service did not answer) counts as taken: bulkhead never hands out a uid
/// it could not check.
pub fn is_taken(uid: u32) -> bool {
    let account = User::from_uid(Uid::from_raw(uid)).map(|a| a.is_some());
    let group = Group::from_gid(Gid::from_raw(uid)).map(|g| g.is_some());
    account.unwrap_or(true) || group.unwrap_or(true)
}

/// `FIRST-LAST` (both included): a range of uids for partitions without `user:`.
pub fn range(text: &str) -> Result<(u32, u32), UserError> {
    let bad = || UserError::NotARange(text.into());
    let (a, b) = text.split_once('-').ok_or_else(bad)?;
    let (a, b) = (
        a.trim().parse::<u32>().map_err(|_| bad())?,
        b.trim().parse::<u32>().map_err(|_| bad())?,
    );
    if a == 0 || a > b || b == NO_UID {
        return Err(UserError::BadRange(text.into()));
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn users_resolve_by_name_and_number() {
        assert_eq!(resolve("root"), Ok((0, 0)));
        assert_eq!(resolve("4000000"), Ok((4_000_000, 4_000_000)));
        let unknown = resolve("no-such-user-bulkhead").unwrap_err();
        assert_eq!(unknown, UserError::Unknown("no-such-user-bulkhead".into()));
        assert_eq!(
            unknown.to_string(),
            "no user `no-such-user-bulkhead` on this machine"
        );
        let no_change = resolve("4294967295").unwrap_err();
        assert_eq!(no_change, UserError::NoChange);
        assert!(no_change.to_string().contains("not a uid"), "{no_change}");
        let nul = resolve("a\0b").unwrap_err();
        assert!(matches!(nul, UserError::Nul { .. }), "{nul:?}");
        assert!(std::error::Error::source(&nul).is_some());
    }

    #[test]
    fn ranges_are_checked() {
        assert_eq!(range("61184-65519"), Ok((61184, 65519)));
        assert_eq!(range("5"), Err(UserError::NotARange("5".into())));
        assert_eq!(range("0-10"), Err(UserError::BadRange("0-10".into())));
        assert!(range("10-5").is_err());
        assert_eq!(
            range("1-4294967295").unwrap_err().to_string(),
            "`1-4294967295`: FIRST must be at least 1 and at most LAST, LAST below 4294967295"
        );
        assert!(is_taken(0));
        assert!(!is_taken(4_000_000));
    }

    /// A gid with a group but no account of the same number is taken too.
    #[test]
    fn a_group_alone_takes_its_number() {
        let groups = std::fs::read_to_string("/etc/group").unwrap_or_default();
        let group_only = groups
            .lines()
            .filter_map(|l| l.split(':').nth(2)?.parse::<u32>().ok())
            .find(|&gid| User::from_uid(Uid::from_raw(gid)) == Ok(None));
        if let Some(gid) = group_only {
            assert!(is_taken(gid), "group {gid}");
        }
    }
}
