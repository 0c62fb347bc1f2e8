//! Who the default workload's users are besides its bookers ([`Mix`]: checkout holders,
//! waiters, the limited sale, eager clients and the operator, all on by default), and `--mix`'s words for it, so a hunt can narrow the users as
//! `--faults` narrows the faults.

use std::fmt;

/// Who the users are besides the default's bookers: each switch adds a kind of turn, drawn
/// from the seed as every other. Every kind is on by default (issue 39: a feature is checked
/// only once the default histories drive it); [`Mix::none`] is the bookers alone, the
/// workload every finding before issue 39 was made on, which the tests that cite such a
/// history by seed and call number pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mix {
    /// Checkout holders: 8% of turns (taken from the bookers' 20%) hold 1–2 seats and then
    /// pay and confirm (45%), extend and then pay and confirm (15%), release (15%) or walk
    /// away for the reaper to lapse (25%), paying in 0.1–3 s against a hold of
    /// [`super::HOLD_TIMES`].
    pub holders: bool,
    /// Waiters: 8% of turns (taken from the bookers') join the flight's waiting list for 1–2
    /// seats, poll their entry for 2–8 s, then confirm the offer they were made (70%) or walk
    /// away from it, or leave the list if none came. Offers last [`super::HOLD_TIMES`]'
    /// `offer_ttl_secs`. On the limited sale, a waiter refused because seats came back takes
    /// them with a hold paid at once, as the refusal tells it to.
    pub waiters: bool,
    /// The limited sale: a second flight of [`super::LIMITED_CAPACITY`] seats on one shard, at
    /// most [`super::LIMIT_PER_USER`] per user, that sells out within seconds: the waiters wait
    /// on it, and half the bookers' and holders' turns go to it, so the per-user limit refuses
    /// and returns meet a list; one buyer refused at its opening sends the refusal's key again
    /// whenever the flight shows seats back on sale (`moves::refused_comes_back`).
    pub limited: bool,
    /// Eager clients: the last user's script books in bursts of [`super::EAGER_BURST`] single
    /// seats at once, on a flight of its own ([`super::EAGER_CAPACITY`] seats), at its first
    /// turn and then now and again (at most [`super::EAGER_BURSTS`]), past the per-user rate
    /// limit's window, so the limit refuses and the refused retry into the next window; and
    /// one holder in 10 who pays confirms [`super::CONFIRMS_AT_ONCE`] times at once.
    pub eager: bool,
    /// The operator ([`super::operator`]): every few seconds reads the flights' live holds
    /// (every page), the limited sale's waiting list and both queues' depths as the admin
    /// routes answer them; once the world is quiet, reads the dead letters, redrives them, and
    /// reads the queues again after the world is quiet once more.
    pub operator: bool,
}

/// The default workload's users: every kind.
impl Default for Mix {
    fn default() -> Self {
        Mix::all()
    }
}

impl Mix {
    pub const NAMES: [&'static str; 5] = ["holders", "waiters", "limited", "eager", "operator"];

    /// Every kind of user.
    pub fn all() -> Self {
        Mix {
            holders: true,
            waiters: true,
            limited: true,
            eager: true,
            operator: true,
        }
    }

    /// The bookers alone: the default workload before issue 39.
    pub fn none() -> Self {
        Mix {
            holders: false,
            waiters: false,
            limited: false,
            eager: false,
            operator: false,
        }
    }

    /// `"all"` (the default), `"none"` (the bookers alone), or a comma-separated list of
    /// [`Mix::NAMES`].
    pub fn parse(list: &str) -> Result<Self, String> {
        match list.trim() {
            "all" | "" => return Ok(Mix::all()),
            "none" => return Ok(Mix::none()),
            _ => {}
        }
        let mut mix = Mix::none();
        for name in list.split(',').map(str::trim) {
            match name {
                "holders" => mix.holders = true,
                "waiters" => mix.waiters = true,
                "limited" => mix.limited = true,
                "eager" => mix.eager = true,
                "operator" => mix.operator = true,
                other => {
                    return Err(format!(
                        "unknown kind of user {other:?}; known: all, none, {}",
                        Mix::NAMES.join(", ")
                    ));
                }
            }
        }
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<&str> = Mix::NAMES
            .iter()
            .zip([
                self.holders,
                self.waiters,
                self.limited,
                self.eager,
                self.operator,
            ])
            .filter_map(|(name, on)| on.then_some(*name))
            .collect();
        match on.len() {
            0 => f.write_str("none"),
            n if n == Mix::NAMES.len() => f.write_str("all"),
            _ => f.write_str(&on.join(",")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mix_parses_and_prints_back() {
        for words in [
            "none",
            "all",
            "holders",
            "waiters",
            "limited",
            "holders,limited",
            "limited,operator",
        ] {
            assert_eq!(Mix::parse(words).unwrap().to_string(), words);
        }
        assert_eq!(
            Mix::parse("waiters,eager,operator,limited,holders").unwrap(),
            Mix::all()
        );
        assert_eq!(Mix::parse("").unwrap(), Mix::default());
        let err = Mix::parse("holders,bidders").unwrap_err();
        assert!(err.contains("\"bidders\""), "{err}");
    }
}
