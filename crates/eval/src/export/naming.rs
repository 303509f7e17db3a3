//! How a vocabulary token is named in a search engine's input, so that every dimension of a
//! vector reaches the engine and comes back as the same term, documents and queries alike. An
//! engine that splits its input on whitespace (Anserini's pre-tokenised input, PISA's query
//! files) would cut a token holding a space in two; PISA, through pyterrier-pisa, lowercases
//! every query term (its `TermProcessor` calls `boost::algorithm::to_lower` even with no
//! stemmer) while CIFF's lexicon keeps the case, so `[CLS]` in a document is never met by
//! `[CLS]` in a query. Such characters are written as `%xx`, the percent-encoding of their
//! UTF-8 bytes with lower-case hex digits, and `%` itself as `%25`, so that names decode back to
//! the tokens they came from; tokens without them are written as they are.

use std::borrow::Cow;

use crate::error::{EvalError, Result};

/// The characters an engine cannot be given as they are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Naming {
    /// Any string is a term (Seismic's JSON keys).
    AsIs,
    /// Whitespace separates terms (Anserini's `-pretokenized` input).
    NoWhitespace,
    /// Whitespace separates terms and ASCII capitals are lowercased (PISA's query terms).
    NoWhitespaceOrCapitals,
}

/// The escape character, escaped itself by every naming but [`Naming::AsIs`].
const ESCAPE: char = '%';

impl Naming {
    /// Whether `c` is written escaped.
    fn escapes(self, c: char) -> bool {
        let splits = c == ESCAPE || c.is_whitespace() || c.is_control();
        match self {
            Self::AsIs => false,
            Self::NoWhitespace => splits,
            Self::NoWhitespaceOrCapitals => splits || c.is_ascii_uppercase(),
        }
    }

    /// `token`'s name; borrowed when nothing in it is escaped. An empty token has no name an
    /// engine that splits on whitespace keeps.
    pub fn name(self, token: &str) -> Result<Cow<'_, str>> {
        if token.is_empty() && self != Self::AsIs {
            return Err(EvalError::Invalid(
                "the vocabulary has an empty token, which an engine's whitespace-separated \
                 input cannot hold"
                    .into(),
            ));
        }
        if !token.chars().any(|c| self.escapes(c)) {
            return Ok(Cow::Borrowed(token));
        }
        let mut name = String::with_capacity(token.len() + 8);
        let mut bytes = [0u8; 4];
        for c in token.chars() {
            if self.escapes(c) {
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    name.push_str(&format!("{ESCAPE}{byte:02x}"));
                }
            } else {
                name.push(c);
            }
        }
        Ok(Cow::Owned(name))
    }

    /// The token `name` stands for: [`Naming::name`] undone.
    pub fn token(self, name: &str) -> Result<String> {
        if self == Self::AsIs {
            return Ok(name.to_string());
        }
        let bad = |why: &str| EvalError::Invalid(format!("term name {name:?}: {why}"));
        let mut bytes = Vec::with_capacity(name.len());
        let mut rest = name.as_bytes();
        while let Some((&byte, tail)) = rest.split_first() {
            if byte == ESCAPE as u8 {
                let hex = tail
                    .get(..2)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .filter(|h| h.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
                    .ok_or_else(|| bad("`%` must be followed by two lower-case hex digits"))?;
                bytes.push(u8::from_str_radix(hex, 16).expect("two hex digits"));
                rest = &tail[2..];
            } else {
                bytes.push(byte);
                rest = tail;
            }
        }
        String::from_utf8(bytes).map_err(|_| bad("its escapes are not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMINGS: [Naming; 3] = [
        Naming::AsIs,
        Naming::NoWhitespace,
        Naming::NoWhitespaceOrCapitals,
    ];

    /// Tokens of BERT, RoBERTa, ALBERT and ModernBERT vocabularies, and the odd ones.
    const TOKENS: [&str; 14] = [
        "the",
        "##ing",
        "[CLS]",
        "[unused0]",
        "ĠThe",
        "▁Paris",
        "<mask>",
        "É",
        "%",
        "100%",
        "two words",
        "\t",
        "a\nb",
        "%2",
    ];

    #[test]
    fn every_name_decodes_to_its_token_and_no_two_tokens_share_a_name() {
        for naming in NAMINGS {
            let mut names = std::collections::HashSet::new();
            for token in TOKENS {
                let name = naming.name(token).unwrap();
                assert_eq!(naming.token(&name).unwrap(), token, "{naming:?} {name}");
                assert!(names.insert(name.into_owned()), "{naming:?} {token}");
            }
        }
    }

    #[test]
    fn names_hold_no_character_their_engine_changes() {
        for token in TOKENS {
            let spaced = Naming::NoWhitespace.name(token).unwrap();
            assert!(!spaced.contains(char::is_whitespace), "{spaced}");
            let pisa = Naming::NoWhitespaceOrCapitals.name(token).unwrap();
            assert_eq!(pisa.to_ascii_lowercase(), pisa, "{token}");
            assert!(!pisa.contains(char::is_whitespace), "{pisa}");
        }
        let pisa = |t| Naming::NoWhitespaceOrCapitals.name(t).unwrap().into_owned();
        assert_eq!(pisa("[CLS]"), "[%43%4c%53]");
        assert_eq!(pisa("ĠThe"), "Ġ%54he");
        assert_eq!(pisa("##ing"), "##ing");
        assert_eq!(Naming::NoWhitespace.name("[CLS]").unwrap(), "[CLS]");
        assert_eq!(Naming::NoWhitespace.name("100%").unwrap(), "100%25");
        assert_eq!(Naming::AsIs.name("two words").unwrap(), "two words");
    }

    #[test]
    fn a_malformed_name_and_an_empty_token_are_refused() {
        for name in ["%", "%4", "%4C", "%zz", "%ff"] {
            let error = Naming::NoWhitespace.token(name).unwrap_err().to_string();
            assert!(error.contains(&format!("{name:?}")), "{error}");
        }
        assert!(Naming::NoWhitespace.name("").is_err());
        assert_eq!(Naming::AsIs.name("").unwrap(), "");
    }
}
