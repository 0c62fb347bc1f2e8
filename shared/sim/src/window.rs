//! The window of history a violation names: the stretch of the upstream's call log and the
//! store's write log between the first and the last record its message cites, printed under a
//! failing seed so the story can be read without replaying it.
//!
//! Why from the message: every checker already names the records it judged in its own words
//! (`call #N` for an upstream call, `+<ms>` for a time since the run's start, as
//! `Record::t` prints it), so reading those back finds the window for every checker alike,
//! and a new checker gets its window by naming its records as the others do. The window is
//! the shortest span that holds every cited record: from the earliest cited time (a cited
//! call counts by its arrival) to the latest (a cited call by its answer). A violation that
//! cites nothing has no window; its message and its replay are what there is.
//!
//! Bound: at most [`WINDOW_LINES`] lines of each log are kept, the rest counted, each cut to
//! [`LINE_CHARS`] characters.

use crate::checkers::Violation;
use crate::upstream::Call;
use seatgate::domain::Millis;
use std::time::Duration;

/// Lines of each log a window keeps at most.
pub const WINDOW_LINES: usize = 40;

/// Characters of a line a window keeps (an intent's JSON runs to a kilobyte); the replay has
/// the rest.
pub const LINE_CHARS: usize = 200;

/// What a window holds: the span, and the calls and writes inside it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    /// Milliseconds since the run's start, first and last.
    pub from_ms: u64,
    pub until_ms: u64,
    /// Call-log lines (`UpstreamModel::call_log`) of calls that arrived in the span, prefixed
    /// by their index.
    pub calls: Vec<String>,
    /// Write-log lines applied in the span, prefixed by their time.
    pub writes: Vec<String>,
    /// Lines left out past [`WINDOW_LINES`]: calls, writes.
    pub omitted: (usize, usize),
}

/// The history a run left, as a window is cut from it.
pub struct History<'a> {
    pub origin: Millis,
    pub call_log: &'a [String],
    pub calls: &'a [Call],
    pub writes: &'a [String],
    pub write_times: &'a [Millis],
}

impl History<'_> {
    /// The window `violation` cites, if it cites any record.
    pub fn window(&self, violation: &Violation) -> Option<Window> {
        let cited = cited(&violation.message);
        let mut span: Option<(Millis, Millis)> = None;
        let mut widen = |from: Millis, until: Millis| {
            span = Some(match span {
                None => (from, until),
                Some((a, b)) => (a.min(from), b.max(until)),
            });
        };
        for i in &cited.calls {
            if let Some(call) = self.calls.get(*i) {
                widen(call.arrived, call.answered.unwrap_or(call.arrived));
            }
        }
        for ms in &cited.times_ms {
            let at = self.origin.plus(Duration::from_millis(*ms));
            widen(at, at);
        }
        let (from, until) = span?;
        let mut window = Window {
            from_ms: from.since(self.origin).as_millis() as u64,
            until_ms: until.since(self.origin).as_millis() as u64,
            ..Window::default()
        };
        for (i, (call, line)) in self.calls.iter().zip(self.call_log).enumerate() {
            if call.arrived < from || call.arrived > until {
                continue;
            }
            if window.calls.len() < WINDOW_LINES {
                window.calls.push(clip(&format!("#{i} {line}")));
            } else {
                window.omitted.0 += 1;
            }
        }
        for (line, at) in self.writes.iter().zip(self.write_times) {
            if *at < from || *at > until {
                continue;
            }
            if window.writes.len() < WINDOW_LINES {
                window.writes.push(clip(&format!(
                    "+{} {line}",
                    at.since(self.origin).as_millis()
                )));
            } else {
                window.omitted.1 += 1;
            }
        }
        Some(window)
    }
}

/// `line`, cut to [`LINE_CHARS`] characters (marked with `...`).
fn clip(line: &str) -> String {
    match line.char_indices().nth(LINE_CHARS) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line.to_owned(),
    }
}

/// The records a message cites.
#[derive(Debug, Default, PartialEq, Eq)]
struct Cited {
    calls: Vec<usize>,
    times_ms: Vec<u64>,
}

/// Reads `call #N` and `+<ms>` back out of a message. Bounded by the message's length.
fn cited(message: &str) -> Cited {
    let mut out = Cited::default();
    for (at, _) in message.match_indices("call #") {
        if let Some(n) = leading_number(&message[at + "call #".len()..]) {
            out.calls.push(n as usize);
        }
    }
    for (at, _) in message.match_indices('+') {
        // A time is `+` then digits, not preceded by a digit (so `1+2` is not one).
        let before = message[..at].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Some(ms) = leading_number(&message[at + 1..]) {
            out.times_ms.push(ms);
        }
    }
    out
}

/// The decimal number `text` starts with, if it starts with a digit.
fn leading_number(text: &str) -> Option<u64> {
    let digits: &str = &text[..text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len())];
    digits.parse().ok()
}

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "  window +{}..=+{} ms: {} calls, {} writes",
            self.from_ms,
            self.until_ms,
            self.calls.len() + self.omitted.0,
            self.writes.len() + self.omitted.1
        )?;
        for line in &self.calls {
            write!(f, "\n    call {line}")?;
        }
        if self.omitted.0 > 0 {
            write!(f, "\n    ... {} more calls", self.omitted.0)?;
        }
        for line in &self.writes {
            write!(f, "\n    write {line}")?;
        }
        if self.omitted.1 > 0 {
            write!(f, "\n    ... {} more writes", self.omitted.1)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_cites_its_calls_and_times() {
        let c = cited(
            "GET /api/seats seat=S-3 (call #77, instance 1) arrived at +40055, 10 ms into the 1000 ms Retry-After the upstream gave at +40045 (call #76 from instance 0: seat=S-2 -> 429 retry-after 1000ms); 1+2",
        );
        assert_eq!(c.calls, vec![77, 76]);
        assert_eq!(c.times_ms, vec![40055, 40045]);
        assert_eq!(cited("nothing cited"), Cited::default());
    }
}
