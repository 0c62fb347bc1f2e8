//! Target names and the chart, on hand-made input.

use super::plot::render;
use super::*;

#[test]
fn targets_parse_by_name_and_all() {
    assert_eq!(Kind::parse("all").unwrap().len(), ALL.len());
    assert_eq!(
        Kind::parse("seatgate,maria-named-lock").unwrap(),
        vec![Kind::Seatgate, Kind::Maria(Strategy::NamedLock)]
    );
    assert!(Kind::parse("mongo").is_err());
}

#[test]
fn order_alternates() {
    assert_eq!(order(3, 0), vec![0, 1, 2]);
    assert_eq!(order(3, 1), vec![2, 1, 0]);
}

#[test]
fn the_plot_has_a_line_per_target() {
    let series = vec![
        ("seatgate".to_owned(), vec![(50.0, 1.0), (150.0, 2.0)]),
        ("postgres".to_owned(), vec![(50.0, 10.0), (150.0, 20.0)]),
    ];
    let svg = render(&series, "t <x>");
    assert_eq!(svg.matches(r#"class="line""#).count(), 2);
    assert!(svg.contains("t &lt;x&gt;"));
}
