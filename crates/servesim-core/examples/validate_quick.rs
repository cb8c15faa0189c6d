//! Prints the validation report with the shipped fit (development aid; the CLI is `servesim validate`).
fn main() {
    let csv = include_str!("../data/calibration/measured-points.csv");
    let only = std::env::args().nth(1);
    let opts = servesim_core::validate::ValidateOptions {
        only_source: only,
        ..Default::default()
    };
    let r = servesim_core::validate::run(csv, &opts).unwrap();
    println!("{}", r.to_markdown());
}
