//! Progress on a terminal for long passes over texts (encoding, exports), hidden when stderr
//! is not one, so that logs and SLURM output files carry no redraws.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};

/// A spinner counting texts on a terminal, hidden otherwise; given a total
/// (`ProgressBar::set_length` with [`counted_style`]), a bar with the ETA.
pub(crate) fn progress_bar(label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new_spinner().with_message(label.to_string());
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}: {human_pos} texts, {per_sec}, {elapsed}")
            .expect("valid template"),
    );
    bar
}

/// The style of a progress bar whose total is known: done of total, rate, elapsed and ETA.
pub(crate) fn counted_style() -> ProgressStyle {
    ProgressStyle::with_template(
        "{msg}: {bar:30} {human_pos}/{human_len} texts, {per_sec}, {elapsed} < {eta}",
    )
    .expect("valid template")
}
