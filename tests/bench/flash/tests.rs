//! The step's arithmetic and its chart, on hand-made samples.

use super::plot::render_svg;
use super::*;

fn sample(start_ms: f64, booking_ms: f64, outcome: Outcome) -> Sample {
    let booking_id = (outcome == Outcome::Created).then(|| format!("b{start_ms}"));
    Sample {
        start_ms,
        login_ms: 0.5,
        booking_ms: Some(booking_ms),
        iteration_ms: Some(booking_ms + 0.5),
        failed_after_ms: None,
        outcome,
        booking_id,
    }
}

fn step(samples: Vec<Sample>, capacity: u32, stored: usize, available: i64) -> StepResult {
    StepResult {
        rate: 400.0,
        duration: Duration::from_secs(1),
        capacity,
        shards: 1,
        flight_id: "f".into(),
        scheduled: samples.len(),
        started: samples.len(),
        dropped_late: 0,
        dropped_full: 0,
        dropped_at: vec![],
        issued_for: Duration::from_secs(1),
        max_lag_ms: 0.0,
        samples,
        stored,
        stored_missing_201: 0,
        created_not_stored: 0,
        duplicate_201_ids: 0,
        available,
    }
}

#[test]
fn a_sold_out_run_is_correct_and_an_oversold_one_is_not() {
    let mut xs: Vec<Sample> = (0..3)
        .map(|i| sample(i as f64, 2.0, Outcome::Created))
        .collect();
    xs.push(sample(5.0, 1.0, Outcome::SoldOut));
    let ok = step(xs.clone(), 3, 3, 0);
    assert!(ok.correctness().is_empty(), "{:?}", ok.correctness());
    assert!(ok.saturation_ok());

    let oversold = step(xs.clone(), 2, 3, -1);
    assert!(!oversold.correctness().is_empty());

    // Demand above capacity but a seat left unsold.
    let mut short = xs.clone();
    short[0].outcome = Outcome::SoldOut;
    short[0].booking_id = None;
    let unsold = step(short, 3, 2, 1);
    assert!(
        unsold
            .correctness()
            .iter()
            .any(|w| w.contains("exceeded capacity"))
    );

    let mut broken = xs;
    broken.push(sample(6.0, 1.0, Outcome::Server(500)));
    assert!(!step(broken, 3, 3, 0).correctness().is_empty());
}

#[test]
fn the_svg_has_a_title_axes_and_lines() {
    let xs: Vec<Sample> = (0..500)
        .map(|i| sample(i as f64 * 2.0, 1.0 + (i % 7) as f64, Outcome::Created))
        .collect();
    let svg = render_svg(&step(xs, 500, 500, 0), "t <1>");
    assert!(svg.starts_with("<svg"));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("t &lt;1&gt;"));
    assert!(svg.contains("time since start (s)"));
    assert_eq!(svg.matches(r#"class="line""#).count(), 3);
}

#[test]
fn saturation_plots_are_named_by_rate() {
    assert_eq!(
        plot_path_from(Some(PathBuf::from("target/x.svg")), Some(2000.0)),
        PathBuf::from("target/x-2000.svg")
    );
    assert_eq!(
        plot_path_from(None, None),
        PathBuf::from("target/flash-sale.svg")
    );
}

fn plot_path_from(plot: Option<PathBuf>, rate: Option<f64>) -> PathBuf {
    use clap::Parser as _;
    let mut cli = Cli::parse_from(["seatgate-bench", "flash-sale"]);
    cli.plot = plot;
    plot_path(&cli, rate)
}

/// `--ceiling-rates` alone skips the generator's ceiling, as its help says (an empty value
/// was refused by the float parser); a list is still a list, and the default stands.
#[test]
fn ceiling_rates_given_no_value_skip_the_ceiling() {
    use clap::Parser as _;
    let rates = |args: &[&str]| {
        Cli::parse_from(["seatgate-bench", "compare"].iter().chain(args)).ceiling_rates
    };
    assert_eq!(rates(&["--ceiling-rates"]), Vec::<f64>::new());
    assert_eq!(
        rates(&["--ceiling-rates", "--burst", "0"]),
        Vec::<f64>::new()
    );
    assert_eq!(rates(&["--ceiling-rates", "500,750"]), vec![500.0, 750.0]);
    assert_eq!(rates(&[]).len(), 6);
}

/// `compare`'s generator process: the arguments it is given parse back into the same step (the
/// step's shape, and the keys), and its result crosses the process boundary whole.
#[test]
fn a_drive_child_is_given_the_step_and_returns_it_whole() {
    use clap::Parser as _;
    let mut parent = Cli::parse_from(["seatgate-bench", "compare", "--keys"]);
    parent.duration = Duration::from_millis(2_500);
    parent.users = 7;
    parent.shards = 3;
    let args = drive::args(&parent, "http://127.0.0.1:9/", 1_234.5, 42, 17);
    let child = Cli::parse_from(std::iter::once("seatgate-bench".to_owned()).chain(args));
    assert_eq!(child.scenario(), crate::Scenario::Drive);
    assert_eq!(child.target.as_deref(), Some("http://127.0.0.1:9/"));
    assert_eq!(child.rate, Some(1_234.5));
    assert_eq!(child.duration, Duration::from_millis(2_500));
    assert_eq!((child.capacity, child.users, child.shards), (42, 7, 3));
    assert_eq!(child.max_in_flight, Some(17));
    assert_eq!(child.lateness, parent.lateness);
    assert!(child.keys);

    let result = step(
        vec![
            sample(1.0, 2.0, Outcome::Created),
            sample(3.0, 0.2, Outcome::Conflict("in_progress".into())),
        ],
        1,
        1,
        0,
    );
    let back: StepResult = serde_json::from_str(&serde_json::to_string(&result).unwrap()).unwrap();
    assert_eq!(format!("{back:?}"), format!("{result:?}"));
}
