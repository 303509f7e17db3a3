//! The settings lsr reads from environment variables (`LSR_MATMUL`, `LSR_ATTENTION`): each one of
//! a few names, unset or empty meaning the first, and a bad value an error that names the
//! variable and the choices.

/// A setting: an enum whose variants are `NAMES` in order, read from `VARIABLE`.
pub trait Setting: Copy + Sized + 'static {
    const VARIABLE: &'static str;
    const NAMES: &'static [&'static str];

    /// The variant at `index` of `NAMES`.
    fn from_index(index: usize) -> Self;

    /// The setting a value of the variable names (unset or empty: the first).
    fn parse(value: Option<&str>) -> std::result::Result<Self, String> {
        let value = value.filter(|v| !v.is_empty()).unwrap_or(Self::NAMES[0]);
        match Self::NAMES.iter().position(|name| *name == value) {
            Some(index) => Ok(Self::from_index(index)),
            None => Err(format!(
                "{}=`{value}`: expected one of {}",
                Self::VARIABLE,
                Self::NAMES.join(", ")
            )),
        }
    }

    /// The variable's value in this process.
    fn from_environment() -> std::result::Result<Self, String> {
        Self::parse(std::env::var(Self::VARIABLE).ok().as_deref())
    }
}
