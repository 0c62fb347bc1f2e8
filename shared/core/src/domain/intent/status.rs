//! What an intent is and where it stands: its kind, its status, how it ended and why (the
//! reason codes clients read). The transitions that move it live in the parent module.

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IntentKind {
    /// Confirmed from a prepared action: one attempt, now.
    Immediate,
    /// Registered wait: attempts whenever the seat may be free, until a deadline.
    Wait,
}

impl IntentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            IntentKind::Immediate => "IMMEDIATE",
            IntentKind::Wait => "WAIT",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "IMMEDIATE" => Some(IntentKind::Immediate),
            "WAIT" => Some(IntentKind::Wait),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum IntentStatus {
    Requested,
    WaitingForSeat,
    Reserving,
    Succeeded,
    FailedRace,
    FailedAuth,
    FailedUpstream,
    /// A wait the user cancelled.
    Cancelled,
    /// A wait that reached its deadline without a seat.
    WaitExpired,
}

impl IntentStatus {
    pub const ALL: [IntentStatus; 9] = [
        IntentStatus::Requested,
        IntentStatus::WaitingForSeat,
        IntentStatus::Reserving,
        IntentStatus::Succeeded,
        IntentStatus::FailedRace,
        IntentStatus::FailedAuth,
        IntentStatus::FailedUpstream,
        IntentStatus::Cancelled,
        IntentStatus::WaitExpired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IntentStatus::Requested => "REQUESTED",
            IntentStatus::WaitingForSeat => "WAITING_FOR_SEAT",
            IntentStatus::Reserving => "RESERVING",
            IntentStatus::Succeeded => "SUCCEEDED",
            IntentStatus::FailedRace => "FAILED_RACE",
            IntentStatus::FailedAuth => "FAILED_AUTH",
            IntentStatus::FailedUpstream => "FAILED_UPSTREAM",
            IntentStatus::Cancelled => "CANCELLED",
            IntentStatus::WaitExpired => "WAIT_EXPIRED",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        Terminal::of(self).is_some()
    }
}

/// A terminal status, by type: what a completion or a close may name, so no write can "close"
/// an intent into a live state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Terminal {
    Succeeded,
    FailedRace,
    FailedAuth,
    FailedUpstream,
    Cancelled,
    WaitExpired,
}

impl Terminal {
    pub fn status(self) -> IntentStatus {
        match self {
            Terminal::Succeeded => IntentStatus::Succeeded,
            Terminal::FailedRace => IntentStatus::FailedRace,
            Terminal::FailedAuth => IntentStatus::FailedAuth,
            Terminal::FailedUpstream => IntentStatus::FailedUpstream,
            Terminal::Cancelled => IntentStatus::Cancelled,
            Terminal::WaitExpired => IntentStatus::WaitExpired,
        }
    }

    /// The terminal status `status` is, if it is one.
    pub fn of(status: IntentStatus) -> Option<Terminal> {
        Some(match status {
            IntentStatus::Succeeded => Terminal::Succeeded,
            IntentStatus::FailedRace => Terminal::FailedRace,
            IntentStatus::FailedAuth => Terminal::FailedAuth,
            IntentStatus::FailedUpstream => Terminal::FailedUpstream,
            IntentStatus::Cancelled => Terminal::Cancelled,
            IntentStatus::WaitExpired => Terminal::WaitExpired,
            IntentStatus::Requested | IntentStatus::WaitingForSeat | IntentStatus::Reserving => {
                return None;
            }
        })
    }
}

impl From<Terminal> for IntentStatus {
    fn from(t: Terminal) -> Self {
        t.status()
    }
}

/// Why an intent is where it is, in a word. Serialized as the stable strings the API, the
/// subscribers' events and the stored items show (`seat_taken`, `upstream_refused_422`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Reason {
    /// The reserve write was answered with a charge.
    Reserved,
    /// The upstream said the seat is taken, or this system knew it was.
    SeatTaken,
    /// The user never stored a credential for the upstream.
    NoCredential,
    /// The upstream refused the user's credential.
    CredentialRejected,
    /// A definite refusal that is neither about the seat nor the credential, with its status.
    UpstreamRefused(u16),
    /// Settled by reading the user's charge, which is on this seat: an unknown outcome, or a
    /// later attempt on a seat this system had already won for the user (no reserve sent).
    ChargeRead,
    /// An unknown outcome settled by reading the user's charge: there is none on this seat.
    NoCharge,
    /// A wait reached its deadline.
    Deadline,
    /// The owner cancelled a wait.
    Cancelled,
    /// A REQUESTED intent whose queue message kept going missing.
    NeverProcessed,
    /// The user already holds a charge upstream (one per user): this intent cannot succeed,
    /// but the seat is still free for others.
    AlreadyCharged,
    /// The upstream asked us to come back later (429, 503): the attempt wrote nothing and goes
    /// back in line.
    UpstreamBusy,
}

impl Reason {
    const UPSTREAM_REFUSED: &'static str = "upstream_refused_";

    pub fn parse(s: &str) -> Option<Reason> {
        Some(match s {
            "reserved" => Reason::Reserved,
            "seat_taken" => Reason::SeatTaken,
            "no_credential" => Reason::NoCredential,
            "credential_rejected" => Reason::CredentialRejected,
            "charge_read" => Reason::ChargeRead,
            "no_charge" => Reason::NoCharge,
            "deadline" => Reason::Deadline,
            "cancelled" => Reason::Cancelled,
            "never_processed" => Reason::NeverProcessed,
            "already_charged" => Reason::AlreadyCharged,
            "upstream_busy" => Reason::UpstreamBusy,
            other => Reason::UpstreamRefused(
                other
                    .strip_prefix(Self::UPSTREAM_REFUSED)?
                    .parse()
                    .ok()
                    .filter(|code| (100..=999).contains(code))?,
            ),
        })
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Reason::Reserved => "reserved",
            Reason::SeatTaken => "seat_taken",
            Reason::NoCredential => "no_credential",
            Reason::CredentialRejected => "credential_rejected",
            Reason::UpstreamRefused(code) => return write!(f, "{}{code}", Self::UPSTREAM_REFUSED),
            Reason::ChargeRead => "charge_read",
            Reason::NoCharge => "no_charge",
            Reason::Deadline => "deadline",
            Reason::Cancelled => "cancelled",
            Reason::NeverProcessed => "never_processed",
            Reason::AlreadyCharged => "already_charged",
            Reason::UpstreamBusy => "upstream_busy",
        })
    }
}

impl From<Reason> for String {
    fn from(r: Reason) -> String {
        r.to_string()
    }
}

impl TryFrom<String> for Reason {
    type Error = String;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        Reason::parse(&s).ok_or_else(|| format!("unknown reason {s:?}"))
    }
}
