//! How lsr writes a number into a text file (`train.csv`, `run.trec`): the shortest digits
//! that read back as the same f64, positional where that is short (0.0001 to 1e16, as Python's
//! `repr`) and in exponent form elsewhere, so that λ = 1.2e-13 is not written as
//! `0.00000000000012000000000000002`.

/// `x` as the shortest text that parses back to exactly `x`.
pub fn shortest(x: f64) -> String {
    let magnitude = x.abs();
    if x == 0.0 || !x.is_finite() || (1e-4..1e16).contains(&magnitude) {
        x.to_string()
    } else {
        format!("{x:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::shortest;

    #[test]
    fn every_number_reads_back_exactly_and_tiny_or_huge_ones_take_an_exponent() {
        let cases = [
            (0.0, "0"),
            (-0.0, "-0"),
            (1.5, "1.5"),
            (300.0, "300"),
            (0.0001, "0.0001"),
            (0.00003, "3e-5"),
            (1.2000000000000002e-13, "1.2000000000000002e-13"),
            (1e16, "1e16"),
            (-2.5e-7, "-2.5e-7"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "inf"),
        ];
        for (x, text) in cases {
            assert_eq!(shortest(x), text);
            let back: f64 = text.parse().unwrap();
            assert!(back.to_bits() == x.to_bits() || x.is_nan(), "{text}");
        }
    }
}
