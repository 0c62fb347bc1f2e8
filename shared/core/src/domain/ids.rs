//! Validated identifiers.
//!
//! Input is checked once, when it enters the domain, so stores and queues can use an id as a key,
//! a message group or a dedup id without re-checking it. Seat ids become SQS `MessageGroupId`s,
//! which allow at most 128 characters of `[A-Za-z0-9!-/:-@[-`{-~]`; we accept a narrower, readable
//! set.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum IdError {
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    #[error("{what} must be at most {max} characters")]
    TooLong { what: &'static str, max: usize },
    #[error("{what} may contain only letters, digits, '-', '_' and '.'")]
    BadCharacter { what: &'static str },
    #[error("{what} is not a valid id")]
    Malformed { what: &'static str },
    #[error("{what} must not be \".\" or \"..\"")]
    DotSegment { what: &'static str },
}

impl IdError {
    /// Which id was refused (`seat_id`, `flight_id`, ...).
    pub fn what(&self) -> &'static str {
        match self {
            IdError::Empty { what }
            | IdError::TooLong { what, .. }
            | IdError::BadCharacter { what }
            | IdError::Malformed { what }
            | IdError::DotSegment { what } => what,
        }
    }
}

pub(crate) fn check_token(what: &'static str, s: &str, max: usize) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty { what });
    }
    if s.chars().count() > max {
        return Err(IdError::TooLong { what, max });
    }
    if !s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(IdError::BadCharacter { what });
    }
    // Dot-segments: every URL path these ids go into (this API's, the upstream's) resolves them
    // away, so `GET /seats/..` would read `/api/` upstream, fail, and count against the breaker.
    if s == "." || s == ".." {
        return Err(IdError::DotSegment { what });
    }
    Ok(())
}

/// Every id type of the domain, declared one way: the newtype, its checked `parse` (by one of
/// three rules), `as_str`, `Display`, and serde through `parse`, so decoding (a queue body, a
/// stored item, an event) refuses a malformed id where it enters, never carrying it along as if
/// valid. The rules:
/// - `token(max)`: 1 to `max` of `[A-Za-z0-9._-]`, not a dot-segment (the seat, room, flight,
///   booking, hold, entry ids and the idempotency key);
/// - `uuid`: a UUID, normalised to lower-case hyphenated form, with `generate` and `from_uuid`
///   (actions and intents);
/// - `printable(max)`: 1 to `max` characters, none a control character (the JWT `sub`, which an
///   identity provider we do not control chooses).
macro_rules! id_type {
    ($(#[$m:meta])* $name:ident, $what:literal, token($max:expr)) => {
        $crate::domain::ids::id_type!(@common $(#[$m])* $name);

        impl $name {
            pub const MAX_LEN: usize = $max;

            pub fn parse(s: &str) -> Result<Self, $crate::domain::IdError> {
                $crate::domain::ids::check_token($what, s, Self::MAX_LEN)?;
                Ok($name(s.to_owned()))
            }
        }
    };
    ($(#[$m:meta])* $name:ident, $what:literal, uuid) => {
        $crate::domain::ids::id_type!(@common $(#[$m])* $name);

        impl $name {
            /// A fresh id from the wall clock and the OS: for tests and tools. The services
            /// take theirs from their `Ids` port (`from_uuid`).
            pub fn generate() -> Self {
                Self::from_uuid(uuid::Uuid::now_v7())
            }

            pub fn from_uuid(id: uuid::Uuid) -> Self {
                $name(id.hyphenated().to_string())
            }

            pub fn parse(s: &str) -> Result<Self, $crate::domain::IdError> {
                $crate::domain::ids::parse_uuid($what, s).map($name)
            }
        }
    };
    ($(#[$m:meta])* $name:ident, $what:literal, printable($max:expr)) => {
        $crate::domain::ids::id_type!(@common $(#[$m])* $name);

        impl $name {
            pub const MAX_LEN: usize = $max;

            pub fn parse(s: &str) -> Result<Self, $crate::domain::IdError> {
                $crate::domain::ids::check_printable($what, s, Self::MAX_LEN)?;
                Ok($name(s.to_owned()))
            }
        }
    };
    (@common $(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = $crate::domain::IdError;

            fn try_from(s: String) -> Result<Self, $crate::domain::IdError> {
                $name::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
pub(crate) use id_type;

id_type!(
    /// A seat in the upstream system, e.g. `A-12`.
    SeatId,
    "seat_id",
    token(64)
);
id_type!(
    /// A room of seats in the upstream system, whose seat map is read in one call.
    RoomId,
    "room_id",
    token(64)
);
id_type!(
    /// The caller, from the JWT `sub` claim. Anything printable: subjects come from an identity
    /// provider we do not control; control characters are refused because the id ends up in
    /// keys and logs.
    UserId,
    "sub",
    printable(128)
);
id_type!(
    /// A prepared action awaiting the caller's confirmation.
    ActionId,
    "action_id",
    uuid
);
id_type!(
    /// A durable reservation intent.
    IntentId,
    "intent_id",
    uuid
);

/// The printable rule ([`id_type!`]'s `printable`).
pub(crate) fn check_printable(what: &'static str, s: &str, max: usize) -> Result<(), IdError> {
    if s.is_empty() {
        return Err(IdError::Empty { what });
    }
    if s.chars().count() > max {
        return Err(IdError::TooLong { what, max });
    }
    if s.chars().any(char::is_control) {
        return Err(IdError::BadCharacter { what });
    }
    Ok(())
}

pub(crate) fn parse_uuid(what: &'static str, s: &str) -> Result<String, IdError> {
    uuid::Uuid::parse_str(s)
        .map(|u| u.hyphenated().to_string())
        .map_err(|_| IdError::Malformed { what })
}

impl IntentId {
    /// A stable small number derived from the id, used to spread index keys (the reaper's due
    /// index) over several partitions. FNV-1a: stable across processes and releases, unlike
    /// `std`'s randomly seeded hasher.
    pub fn shard(&self, shards: u32) -> u32 {
        shard_of(&self.0, shards)
    }
}

/// FNV-1a of `id` modulo `shards`: stable across builds and platforms, which a due index's
/// shard must be.
pub(crate) fn shard_of(id: &str, shards: u32) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in id.as_bytes() {
        h ^= u32::from(*b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % shards.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seat_ids_are_checked() {
        assert!(SeatId::parse("A-12").is_ok());
        assert_eq!(SeatId::parse(""), Err(IdError::Empty { what: "seat_id" }));
        assert!(matches!(
            SeatId::parse(&"x".repeat(65)),
            Err(IdError::TooLong { .. })
        ));
        assert!(matches!(
            SeatId::parse("A 12"),
            Err(IdError::BadCharacter { .. })
        ));
        assert!(matches!(
            SeatId::parse("A/12"),
            Err(IdError::BadCharacter { .. })
        ));
        for dots in [".", ".."] {
            assert_eq!(
                SeatId::parse(dots),
                Err(IdError::DotSegment { what: "seat_id" })
            );
        }
        assert!(SeatId::parse("...").is_ok());
        assert!(SeatId::parse(".5").is_ok());
    }

    #[test]
    fn uuid_ids_are_normalised_and_checked() {
        let id = IntentId::generate();
        assert_eq!(IntentId::parse(id.as_str()).unwrap(), id);
        assert_eq!(IntentId::parse(&id.as_str().to_uppercase()).unwrap(), id);
        assert!(IntentId::parse("../etc/passwd").is_err());
    }

    #[test]
    fn shards_are_stable_and_spread() {
        let id = IntentId("0192d0f5-0000-7000-8000-000000000000".into());
        assert_eq!(id.shard(16), id.shard(16));
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..200 {
            seen.insert(IntentId::generate().shard(16));
        }
        assert!(
            seen.len() >= 12,
            "200 ids hit only {} of 16 shards",
            seen.len()
        );
    }

    #[test]
    fn user_ids_refuse_control_characters() {
        assert!(UserId::parse("user@example.com").is_ok());
        assert!(UserId::parse("a\nb").is_err());
        assert!(UserId::parse("").is_err());
    }

    #[test]
    fn decoding_validates_like_parsing() {
        let seat: SeatId = serde_json::from_str("\"A-12\"").unwrap();
        assert_eq!(seat, SeatId::parse("A-12").unwrap());
        assert_eq!(serde_json::to_string(&seat).unwrap(), "\"A-12\"");
        for bad in ["\"\"", "\"A 12\"", "\"A/12\"", "12"] {
            assert!(serde_json::from_str::<SeatId>(bad).is_err(), "{bad}");
        }
        assert!(serde_json::from_str::<IntentId>("\"../etc/passwd\"").is_err());
        assert!(serde_json::from_str::<UserId>("\"a\\nb\"").is_err());
        let id = IntentId::generate();
        let upper = format!("\"{}\"", id.as_str().to_uppercase());
        assert_eq!(
            serde_json::from_str::<IntentId>(&upper).unwrap(),
            id,
            "normalised as parse does"
        );
    }
}
