//! Splits expression text into tokens, each with the 1-based column (in
//! characters) where it starts.

use gpuq_core::{Error, Result};

use crate::ast::number_text;

/// What a token is.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    /// A number literal's value (finite, non-negative).
    Num(f64),
    /// A name: letters, digits and `_`, not starting with a digit.
    Name(String),
    LParen,
    RParen,
    LBracket,
    RBracket,
    Comma,
    Plus,
    Minus,
    Star,
    Slash,
    Caret,
    /// After the last character.
    End,
}

/// A token and its column.
#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub(crate) tok: Tok,
    pub(crate) col: usize,
}

impl Tok {
    /// How an error message names the token.
    pub(crate) fn describe(&self) -> String {
        match self {
            Tok::Num(v) => format!("number {}", number_text(*v)),
            Tok::Name(n) => format!("name '{n}'"),
            Tok::LParen => "'('".into(),
            Tok::RParen => "')'".into(),
            Tok::LBracket => "'['".into(),
            Tok::RBracket => "']'".into(),
            Tok::Comma => "','".into(),
            Tok::Plus => "'+'".into(),
            Tok::Minus => "'-'".into(),
            Tok::Star => "'*'".into(),
            Tok::Slash => "'/'".into(),
            Tok::Caret => "'^'".into(),
            Tok::End => "end of input".into(),
        }
    }
}

/// An [`Error::Expression`] at `column`.
pub(crate) fn error(column: usize, message: impl Into<String>) -> Error {
    Error::Expression {
        column,
        message: message.into(),
    }
}

/// The tokens of `text`, ending with [`Tok::End`]. Errors: a character that
/// starts no token, a malformed number (`1e`, `1.2.3` is two numbers), a
/// number too large for f64. Cost: linear in the text.
pub(crate) fn tokenize(text: &str) -> Result<Vec<Token>> {
    let chars: Vec<char> = text.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let single = match c {
            '(' => Some(Tok::LParen),
            ')' => Some(Tok::RParen),
            '[' => Some(Tok::LBracket),
            ']' => Some(Tok::RBracket),
            ',' => Some(Tok::Comma),
            '+' => Some(Tok::Plus),
            '-' => Some(Tok::Minus),
            '*' => Some(Tok::Star),
            '/' => Some(Tok::Slash),
            '^' => Some(Tok::Caret),
            _ => None,
        };
        let (tok, next) = if let Some(tok) = single {
            (tok, i + 1)
        } else if c.is_ascii_digit() || c == '.' {
            number(&chars, i)?
        } else if c.is_ascii_alphabetic() || c == '_' {
            let end = scan(&chars, i, |c| c.is_ascii_alphanumeric() || c == '_');
            (Tok::Name(chars[i..end].iter().collect()), end)
        } else {
            return Err(error(col, format!("unexpected character {c:?}")));
        };
        tokens.push(Token { tok, col });
        i = next;
    }
    tokens.push(Token {
        tok: Tok::End,
        col: chars.len() + 1,
    });
    Ok(tokens)
}

/// The first position at or after `i` whose character fails `accept`.
fn scan(chars: &[char], mut i: usize, accept: impl Fn(char) -> bool) -> usize {
    while i < chars.len() && accept(chars[i]) {
        i += 1;
    }
    i
}

/// The number starting at `start`: digits, an optional fraction (`1.5`, `2.`,
/// `.5`), an optional exponent (`e-3`, `E+10`); and the position after it.
fn number(chars: &[char], start: usize) -> Result<(Tok, usize)> {
    let digits = |i| scan(chars, i, |c| c.is_ascii_digit());
    let mut i = digits(start);
    let mut mantissa_digits = i - start;
    if i < chars.len() && chars[i] == '.' {
        let end = digits(i + 1);
        mantissa_digits += end - (i + 1);
        i = end;
    }
    let mut well_formed = mantissa_digits > 0;
    if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
        let mut j = i + 1;
        if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
            j += 1;
        }
        let end = digits(j);
        well_formed &= end > j;
        i = end.max(j);
    }
    let text: String = chars[start..i].iter().collect();
    let col = start + 1;
    let value = match text.parse::<f64>() {
        Ok(v) if well_formed => v,
        _ => return Err(error(col, format!("malformed number '{text}'"))),
    };
    if value.is_infinite() {
        return Err(error(col, format!("number '{text}' is too large")));
    }
    Ok((Tok::Num(value), i))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(text: &str) -> Vec<Tok> {
        tokenize(text).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn numbers_in_every_form() {
        for (text, v) in [
            ("1", 1.0),
            ("1.5", 1.5),
            (".5", 0.5),
            ("2.", 2.0),
            ("1e-3", 1e-3),
            ("2.5E+10", 2.5e10),
            ("1e400000000000000000000000", f64::NAN),
        ] {
            match tokenize(text) {
                Ok(t) => assert_eq!(t[0].tok, Tok::Num(v), "{text}"),
                Err(e) => assert!(v.is_nan() && e.to_string().contains("too large"), "{e}"),
            }
        }
        assert_eq!(toks("1.5.5"), vec![Tok::Num(1.5), Tok::Num(0.5), Tok::End]);
    }

    #[test]
    fn malformed_numbers_and_characters_are_errors_at_their_column() {
        for (text, col) in [
            ("1e", 1),
            ("x1 + 2e+", 6),
            (".", 1),
            ("x1 # 2", 4),
            ("é + ü", 1),
        ] {
            match tokenize(text) {
                Err(Error::Expression { column, .. }) => assert_eq!(column, col, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        // Columns count characters, not bytes.
        // (no-break spaces are whitespace of two bytes each).
        let t = tokenize("\u{a0}\u{a0}#").unwrap_err();
        assert!(matches!(t, Error::Expression { column: 3, .. }), "{t}");
        let t = tokenize(" (  x1").unwrap();
        assert_eq!(t.iter().map(|t| t.col).collect::<Vec<_>>(), vec![2, 5, 7]);
    }
}
