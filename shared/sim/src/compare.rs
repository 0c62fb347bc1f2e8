//! Comparing two runs' records: the first line where they part, with its neighbours, so a
//! failed replay says where the histories diverged rather than only that they did.

/// `None` if `a` and `b` are equal line for line (and so byte for byte); otherwise a message
/// naming the first differing line (1-based) of the record called `what`, both versions, and
/// the line before it for context.
pub fn first_difference(what: &str, a: &[String], b: &[String]) -> Option<String> {
    let at = a
        .iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))?;
    let before = at
        .checked_sub(1)
        .and_then(|i| a.get(i))
        .map_or_else(String::new, |l| format!("\n  line {at} (same): {l}"));
    let line = |r: &[String]| {
        r.get(at)
            .cloned()
            .unwrap_or_else(|| "<end of record>".into())
    };
    Some(format!(
        "{what}: {} vs {} lines; first difference at line {}{before}\n  first:  {}\n  second: {}",
        a.len(),
        b.len(),
        at + 1,
        line(a),
        line(b)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &[&str]) -> Vec<String> {
        s.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn names_the_first_differing_line_or_the_shorter_end() {
        assert_eq!(
            first_difference("w", &lines(&["a", "b"]), &lines(&["a", "b"])),
            None
        );
        let d = first_difference("w", &lines(&["a", "b", "c"]), &lines(&["a", "x", "c"])).unwrap();
        assert!(
            d.contains("line 2") && d.contains("first:  b") && d.contains("second: x"),
            "{d}"
        );
        let d = first_difference("w", &lines(&["a"]), &lines(&["a", "b"])).unwrap();
        assert!(d.contains("line 2") && d.contains("<end of record>"), "{d}");
    }
}
