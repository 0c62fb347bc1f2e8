//! Comparing two runs' records: the first line where they part, with its neighbours, so a
//! failed replay says where the histories diverged rather than only that they did; and a
//! digest of a run's records, to compare runs across processes.

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

/// A 64-bit digest of records, line by line (each line ends with a newline, each record with a
/// zero word): a run's fingerprint, short enough to print, so runs in different processes can be
/// compared too (a per-process source of order, such as a `HashMap`'s random keys or an address,
/// would make their fingerprints differ). Not a cryptographic hash: FNV-1a's step taken over
/// little-endian 8-byte words rather than bytes (a run's log is megabytes, and byte-wise FNV was
/// a twentieth of a seed's time), with a fold of the high bits after each word so that every
/// bit of a word reaches every later one.
pub fn digest<'a>(records: impl IntoIterator<Item = &'a [String]>) -> String {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = OFFSET;
    let mut eat = |w: u64| {
        h ^= w;
        h = h.wrapping_mul(PRIME);
        h ^= h >> 32;
    };
    for record in records {
        for line in record {
            let mut words = line.as_bytes().chunks_exact(8);
            for word in &mut words {
                eat(u64::from_le_bytes(
                    word.try_into().expect("an 8-byte chunk"),
                ));
            }
            // The tail, padded, then the line's end (its length too, so padding cannot alias).
            let mut tail = [0u8; 8];
            tail[..words.remainder().len()].copy_from_slice(words.remainder());
            eat(u64::from_le_bytes(tail));
            eat(u64::from(b'\n') << 56 | line.len() as u64);
        }
        eat(0);
    }
    format!("{h:016x}")
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

    #[test]
    fn a_digest_tells_records_and_their_boundaries_apart() {
        let (ab, a_b) = (lines(&["a", "b"]), [lines(&["a"]), lines(&["b"])]);
        assert_eq!(digest([ab.as_slice()]), digest([ab.as_slice()]));
        assert_ne!(
            digest([ab.as_slice()]),
            digest(a_b.iter().map(Vec::as_slice))
        );
        assert_ne!(digest([lines(&["ab"]).as_slice()]), digest([ab.as_slice()]));
    }
}
