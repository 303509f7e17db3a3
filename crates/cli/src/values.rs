//! The values a numeric flag can take, one parser per kind, so that a value nobody can mean
//! (`--top-k 0`, `--batch-size 0`, `--quantize nan`) is refused at parsing with the flag's name,
//! not turned into empty results. Every numeric flag of every subcommand names one of these,
//! or is listed in the test below as one where 0 can be meant.

use std::fmt::Display;
use std::str::FromStr;

/// A count or a size: a whole number ≥ 1.
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A factor or a norm: finite and > 0.
pub fn positive<T>(text: &str) -> Result<T, String>
where
    T: FromStr + Into<f64> + Copy,
    T::Err: Display,
{
    let value: T = text.parse().map_err(|e: T::Err| e.to_string())?;
    let x: f64 = value.into();
    if x.is_finite() && x > 0.0 {
        Ok(value)
    } else {
        Err("must be finite and > 0".into())
    }
}

/// A named matrix product of `lsr bench matmul`: `NAME=MxKxN`, a trailing `t` where the right
/// operand is the transpose of an `[N, K]` matrix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProductShape {
    pub name: String,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub transposed_rhs: bool,
}

pub fn product_shape(text: &str) -> Result<ProductShape, String> {
    let expected = || format!("`{text}`: expected NAME=MxKxN or NAME=MxKxNt, each size ≥ 1");
    let (name, dims) = text.split_once('=').ok_or_else(expected)?;
    let (dims, transposed_rhs) = match dims.strip_suffix('t') {
        Some(dims) => (dims, true),
        None => (dims, false),
    };
    let sizes: Vec<usize> = dims
        .split('x')
        .map(at_least_one)
        .collect::<Result<_, _>>()
        .map_err(|_| expected())?;
    match (name.is_empty(), sizes.as_slice()) {
        (false, &[m, k, n]) => Ok(ProductShape {
            name: name.to_string(),
            m,
            k,
            n,
            transposed_rhs,
        }),
        _ => Err(expected()),
    }
}

/// A significance level: strictly between 0 and 1.
pub fn level(text: &str) -> Result<f64, String> {
    let value = text.parse::<f64>().map_err(|e| e.to_string())?;
    if value > 0.0 && value < 1.0 {
        Ok(value)
    } else {
        Err("must be between 0 and 1, both excluded".into())
    }
}

/// A k of a grid to choose from, as every k is read (`lsr_backbone::Scale`).
pub fn scale(text: &str) -> Result<f64, String> {
    text.parse::<lsr_backbone::Scale>()
        .map(lsr_backbone::Scale::get)
}

#[cfg(test)]
mod tests {
    use std::any::TypeId;

    #[test]
    fn product_shapes_name_their_sizes_and_whether_the_right_operand_is_transposed() {
        let head = super::product_shape("head=32768x768x30522t").unwrap();
        assert_eq!(
            (head.name.as_str(), head.m, head.k, head.n),
            ("head", 32768, 768, 30522)
        );
        assert!(head.transposed_rhs);
        assert!(!super::product_shape("ffn=8x4x2").unwrap().transposed_rhs);
        for bad in ["8x4x2", "=8x4x2", "a=8x4", "a=8x0x2", "a=8x4x2tt", "a=8xx2"] {
            let error = super::product_shape(bad).unwrap_err();
            assert!(error.contains(bad), "{bad}: {error}");
        }
    }

    use clap::{CommandFactory, Parser};

    /// Whole-number flags where 0 (or any value of the type) can be meant, and why.
    const ZERO_MEANT: [(&str, &str); 4] = [
        ("seed", "any seed is a seed"),
        (
            "relevance-level",
            "trec_eval -l takes any grade, 0 and negative ones included",
        ),
        ("warmup", "no untimed run first"),
        ("gpus", "a Slurm task without a GPU (the CPU backend)"),
    ];

    /// Every numeric flag of every subcommand, found by walking the command tree (so that a
    /// new one cannot be missed), refuses 0 (and a negative, NaN or infinite real number) at
    /// parsing, with its name in the message, unless it is one of `ZERO_MEANT`.
    #[test]
    fn every_numeric_flag_refuses_values_that_cannot_be_meant_by_name() {
        let is = |kind: clap::builder::ValueParser, types: &[TypeId]| {
            types.iter().any(|t| kind.type_id() == *t)
        };
        let (mut checked, mut zero_meant) = (0, Vec::new());
        let mut commands = vec![(vec!["lsr".to_string()], crate::Cli::command())];
        while let Some((path, command)) = commands.pop() {
            for sub in command.get_subcommands() {
                let path = [path.clone(), vec![sub.get_name().to_string()]].concat();
                commands.push((path, sub.clone()));
            }
            for arg in command.get_arguments() {
                let Some(long) = arg.get_long() else { continue };
                let parser = arg.get_value_parser().clone();
                let integer = [
                    TypeId::of::<usize>(),
                    TypeId::of::<u64>(),
                    TypeId::of::<i32>(),
                ];
                let bad: &[&str] =
                    if is(parser.clone(), &[TypeId::of::<f64>(), TypeId::of::<f32>()]) {
                        &["0", "-1", "nan", "inf"]
                    } else if is(parser, &integer) {
                        &["0"]
                    } else {
                        continue;
                    };
                if ZERO_MEANT.iter().any(|(name, _)| *name == long) {
                    zero_meant.push(long.to_string());
                    continue;
                }
                for value in bad {
                    let argv = [path.clone(), vec![format!("--{long}={value}")]].concat();
                    let Err(error) = crate::Cli::try_parse_from(&argv) else {
                        panic!("{argv:?} was accepted");
                    };
                    let text = error.to_string();
                    assert_eq!(
                        error.kind(),
                        clap::error::ErrorKind::ValueValidation,
                        "{argv:?}: {text}"
                    );
                    assert!(text.contains(&format!("--{long}")), "{argv:?}: {text}");
                }
                checked += 1;
            }
        }
        assert!(checked >= 30, "only {checked} numeric flags found");
        for (name, _) in ZERO_MEANT {
            assert!(
                zero_meant.iter().any(|n| n == name),
                "no flag --{name} any more"
            );
        }
    }
}
