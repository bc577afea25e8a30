//! The fast path's line parser: the data lines of one piece of a Matrix
//! Market data section (whole lines), scanned once (token ends and indices
//! eight bytes at a time), without line numbers.
//!
//! It accepts a subset of what the serial parser accepts and gives the same
//! entries for it: tokens separated by ASCII white space (space, tab, `\r`,
//! form feed), lines ended by `\n`, comment lines (`%` after optional white
//! space) and blank lines skipped, indices of at most 19 plain decimal
//! digits, values with the bits the standard library's parser gives them, as
//! in the serial parser (short decimals computed exactly here, the others
//! by that parser). Anything else (other white space, a sign before an
//! index, a bad, missing or extra token, an entry that the symmetry forbids,
//! a value that is not finite) makes it give up (`None`): the serial parser
//! then reports the error with its line, or parses the text when the
//! difference was only one of form.

use super::{MmField, MmHeader, MmSymmetry};
use gpuq_core::{RealScalar, Scalar};

/// Whether `b` separates tokens within a line: ASCII white space other than
/// the line end.
#[inline]
fn is_blank(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | 0x0c)
}

/// Whether `b` ends a token: a separator or the line end.
#[inline]
fn ends_token(b: u8) -> bool {
    is_blank(b) || b == b'\n'
}

/// The first position at or after `pos` in `b` whose byte is not one to
/// `skip` (the length of `b` when there is none). O(bytes passed).
#[inline]
fn skip_while(b: &[u8], pos: usize, skip: impl Fn(u8) -> bool) -> usize {
    b.get(pos..).map_or(pos, |rest| {
        pos + rest.iter().position(|&c| !skip(c)).unwrap_or(rest.len())
    })
}

/// The first position at or after `pos` in `b` whose byte is at most `b' '`
/// (a separator, the line end or another control byte, which the caller
/// then refuses) or the length of `b`: the end of the token at `pos`. Eight
/// bytes at a time. O(token).
#[inline]
fn token_end(b: &[u8], mut pos: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    while let Some(chunk) = b.get(pos..).and_then(<[u8]>::first_chunk::<8>) {
        let x = u64::from_le_bytes(*chunk);
        // The high bit of every byte below 0x21, exact up to the first one
        // (a borrow may mark bytes after it, never before).
        let low = x.wrapping_sub(ONES * 0x21) & !x & (ONES * 0x80);
        if low != 0 {
            return pos + (low.trailing_zeros() / 8) as usize;
        }
        pos += 8;
    }
    skip_while(b, pos, |c| c > b' ')
}

/// The value and the number of the decimal digits at `pos` in `b` (the
/// value wraps past 19 digits, which callers refuse). Up to 7 digits
/// followed by another byte are read at once: a non-digit found among 8
/// bytes, the digits combined pairwise (SWAR). O(digits).
#[inline]
fn leading_digits(b: &[u8], pos: usize) -> (u64, usize) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    if let Some(chunk) = b.get(pos..).and_then(<[u8]>::first_chunk::<8>) {
        let x = u64::from_le_bytes(*chunk);
        let t = x.wrapping_sub(ONES * u64::from(b'0'));
        // The high bit of every byte that is not a digit (below '0': the
        // subtraction's, above '9': the addition's; at or above 0x80: one of
        // them), exact up to the first such byte.
        let non_digit = (t | x.wrapping_add(ONES * 0x46)) & (ONES * 0x80);
        let n = (non_digit.trailing_zeros() / 8) as usize;
        if n == 0 {
            return (0, 0);
        }
        if n < 8 {
            // The digits' values, the first in the lowest byte, moved up
            // so that zeros lead; then pairs, quadruples, the eight.
            let v = t << (8 * (8 - n));
            let v = v.wrapping_mul(10).wrapping_add(v >> 8);
            let mask = 0x0000_00ff_0000_00ff;
            let v = ((v & mask).wrapping_mul(100 + (1_000_000 << 32)))
                .wrapping_add(((v >> 16) & mask).wrapping_mul(1 + (10_000 << 32)))
                >> 32;
            return (v, n);
        }
    }
    let end = skip_while(b, pos, |c| c.is_ascii_digit());
    let value = b[pos..end].iter().fold(0u64, |k, &c| {
        k.wrapping_mul(10).wrapping_add(u64::from(c - b'0'))
    });
    (value, end - pos)
}

/// A position in a piece of a data section.
struct Scanner<'a> {
    text: &'a str,
    pos: usize,
}

impl<'a> Scanner<'a> {
    /// Moves to the first token of the next data line, past blank and
    /// comment lines; `false` at the end of the piece. O(bytes passed).
    #[inline]
    fn next_entry(&mut self) -> bool {
        let b = self.text.as_bytes();
        let mut pos = self.pos;
        loop {
            pos = skip_while(b, pos, ends_token);
            match b.get(pos) {
                Some(b'%') => pos = skip_while(b, pos, |c| c != b'\n'),
                found => {
                    self.pos = pos;
                    return found.is_some();
                }
            }
        }
    }

    /// The token at the position and a move past the separators after it;
    /// `None` at the line's end (a missing token). A control byte other
    /// than a separator ends the token too, and is refused by the next
    /// token or the line's end. O(token).
    #[inline]
    fn token(&mut self) -> Option<&'a str> {
        let b = self.text.as_bytes();
        let start = self.pos;
        let end = token_end(b, start);
        self.pos = skip_while(b, end, is_blank);
        // Both ends sit next to ASCII bytes (or the piece's ends): character
        // boundaries, so `get` never fails here.
        self.text.get(start..end).filter(|t| !t.is_empty())
    }

    /// A 1-based index token of 1 to 19 decimal digits (no sign), checked to
    /// lie in `1..=bound`, as a 0-based index; `None` otherwise. O(token).
    #[inline]
    fn index(&mut self, bound: usize) -> Option<usize> {
        let b = self.text.as_bytes();
        let (k, digits) = leading_digits(b, self.pos);
        let end = self.pos + digits;
        if digits == 0 || digits > 19 || b.get(end).is_some_and(|&c| !ends_token(c)) {
            return None;
        }
        self.pos = skip_while(b, end, is_blank);
        let k = usize::try_from(k).ok()?;
        (1..=bound).contains(&k).then(|| k - 1)
    }

    /// Ends an entry's line: `true` when only the line end (or the piece's
    /// end) follows the tokens read, and then moves past it. O(1).
    #[inline]
    fn end_line(&mut self) -> bool {
        match self.text.as_bytes().get(self.pos) {
            None => true,
            Some(b'\n') => {
                self.pos += 1;
                true
            }
            Some(_) => false,
        }
    }

    /// One real number of an entry (a value, or a part of a complex one):
    /// the next token parsed as the serial parser parses it (`i64` for the
    /// `integer` field, `f64` otherwise), required finite in `f64` and in
    /// `T`'s real type. O(token).
    #[inline]
    fn number<T: Scalar>(&mut self, field: MmField) -> Option<T::Real> {
        let token = self.token()?;
        let x = if field == MmField::Integer {
            token.parse::<i64>().ok()? as f64
        } else if token.len() <= SHORT_DECIMAL {
            match short_decimal(token.as_bytes()) {
                Some(x) => x,
                None => token.parse::<f64>().ok()?,
            }
        } else {
            token.parse::<f64>().ok()?
        };
        let r = <T::Real as RealScalar>::of_f64(x);
        (x.is_finite() && r.is_finite_value()).then_some(r)
    }

    /// The value of an entry by its field (no token for `pattern`: 1).
    /// O(tokens).
    #[inline]
    fn value<T: Scalar>(&mut self, field: MmField) -> Option<T> {
        match field {
            MmField::Pattern => Some(T::one()),
            MmField::Real | MmField::Integer => Some(T::from_real(self.number::<T>(field)?)),
            MmField::Complex => {
                let re = self.number::<T>(field)?;
                let im = self.number::<T>(field)?;
                Some(T::from_parts(re, im))
            }
        }
    }
}

/// Longest token tried as a short decimal (16 digits and a point: longer
/// ones rarely are one, 17 significant digits never, and the standard
/// library's parser reads them faster than a failed try and it together).
const SHORT_DECIMAL: usize = 17;

/// `token` as an `f64` when it is a short decimal:
/// `[+-]digits[.digits][(e|E)[+-]digits]` (digits before or after the
/// point) of at most 19 digits worth at most 2^53 and a power of ten within
/// 10^±22, with at most 4 exponent digits. Then the digits and the power of
/// ten are exact doubles and one correctly rounded product or quotient
/// gives the correctly rounded value: the bits `f64::from_str` gives, whose
/// grammar holds this one. `None` otherwise. O(token).
#[inline]
fn short_decimal(token: &[u8]) -> Option<f64> {
    /// The powers of ten that are exact doubles.
    const POW10: [f64; 23] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
        1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
    ];
    let sign = |c: Option<&u8>| match c {
        Some(b'-') => Some(true),
        Some(b'+') => Some(false),
        _ => None,
    };
    let negative = sign(token.first()) == Some(true);
    let mut pos = usize::from(sign(token.first()).is_some());
    // Digits into `w` (wrapping past 19 digits, which are refused).
    let (mut w, mut digits, mut scaled, mut point) = (0u64, 0usize, 0i64, false);
    while let Some(&c) = token.get(pos) {
        let d = c.wrapping_sub(b'0');
        if d <= 9 {
            w = w.wrapping_mul(10).wrapping_add(u64::from(d));
            digits += 1;
            scaled -= i64::from(point);
        } else if c == b'.' && !point {
            point = true;
        } else {
            break;
        }
        pos += 1;
    }
    if digits == 0 || digits > 19 || w > 1 << 53 {
        return None;
    }
    if matches!(token.get(pos), Some(b'e' | b'E')) {
        pos += 1;
        let exp_negative = sign(token.get(pos));
        pos += usize::from(exp_negative.is_some());
        let from = pos;
        let mut e = 0i64;
        while let Some(d) = token.get(pos).map(|c| c.wrapping_sub(b'0')) {
            if d > 9 || pos - from == 4 {
                break;
            }
            e = e * 10 + i64::from(d);
            pos += 1;
        }
        if pos == from {
            return None;
        }
        scaled += if exp_negative == Some(true) { -e } else { e };
    }
    if pos != token.len() || scaled.abs() > 22 {
        return None;
    }
    let power = POW10[scaled.unsigned_abs() as usize];
    let v = if scaled < 0 {
        w as f64 / power
    } else {
        w as f64 * power
    };
    Some(if negative { -v } else { v })
}

/// The values of the data lines of `piece` (whole lines of an `array` file)
/// in order, or `None` at any problem. O(piece length).
pub(super) fn array_values<T: Scalar>(piece: &str, field: MmField) -> Option<Vec<T>> {
    let mut s = Scanner {
        text: piece,
        pos: 0,
    };
    let mut out = Vec::with_capacity(piece.len() / 16);
    while s.next_entry() {
        out.push(s.value::<T>(field)?);
        if !s.end_line() {
            return None;
        }
    }
    Some(out)
}

/// The triplets of a piece of a `coordinate` file, 0-based, in file order
/// (symmetric storage mirrored, each mirror right after its entry, as the
/// serial parser stores them), with the indices as `u32` (the size line
/// bounds the dimensions by `u32::MAX`).
pub(super) struct Entries<T> {
    /// Row of each triplet.
    pub rows: Vec<u32>,
    /// Column of each triplet.
    pub cols: Vec<u32>,
    /// Value of each triplet.
    pub vals: Vec<T>,
    /// Entry lines read (before mirroring).
    pub lines: usize,
    /// Whether `(row, column)` strictly increases along the triplets: then
    /// they are already the CSR order, without duplicates.
    pub ordered: bool,
    /// The least key (`row << 32 | column`) the next triplet needs to keep
    /// the triplets ordered.
    next_key: u64,
}

impl<T: Scalar> Entries<T> {
    /// No triplets, room for `cap`.
    fn with_capacity(cap: usize) -> Self {
        Entries {
            rows: Vec::with_capacity(cap),
            cols: Vec::with_capacity(cap),
            vals: Vec::with_capacity(cap),
            lines: 0,
            ordered: true,
            next_key: 0,
        }
    }

    /// Appends the triplet `(i, j, v)` (indices below `u32::MAX`). O(1)
    /// amortised.
    #[inline]
    fn push(&mut self, i: usize, j: usize, v: T) {
        let key = (i as u64) << 32 | j as u64;
        self.ordered &= key >= self.next_key;
        self.next_key = key + 1;
        self.rows.push(i as u32);
        self.cols.push(j as u32);
        self.vals.push(v);
    }

    /// Number of triplets.
    pub fn len(&self) -> usize {
        self.vals.len()
    }
}

/// The triplets of the data lines of `piece` (whole lines of a `coordinate`
/// file of `nrows x ncols` with banner `header`), or `None` at any problem,
/// an entry outside the stored triangle of a symmetric file or a nonzero
/// imaginary part on a hermitian diagonal included. O(piece length).
pub(super) fn coordinate_entries<T: Scalar>(
    piece: &str,
    header: MmHeader,
    nrows: usize,
    ncols: usize,
) -> Option<Entries<T>> {
    let mut s = Scanner {
        text: piece,
        pos: 0,
    };
    let mirrored = if header.symmetry == MmSymmetry::General {
        1
    } else {
        2
    };
    let mut e = Entries::with_capacity(piece.len() / 16 * mirrored);
    while s.next_entry() {
        let i = s.index(nrows)?;
        let j = s.index(ncols)?;
        let v: T = s.value(header.field)?;
        if !s.end_line() {
            return None;
        }
        e.lines += 1;
        match header.symmetry {
            MmSymmetry::General => e.push(i, j, v),
            MmSymmetry::Symmetric => {
                if i < j {
                    return None;
                }
                e.push(i, j, v);
                if i != j {
                    e.push(j, i, v);
                }
            }
            MmSymmetry::SkewSymmetric => {
                if i <= j {
                    return None;
                }
                e.push(i, j, v);
                e.push(j, i, -v);
            }
            MmSymmetry::Hermitian => {
                if i < j || (i == j && !v.im().is_zero_value()) {
                    return None;
                }
                e.push(i, j, v);
                if i != j {
                    e.push(j, i, v.conj());
                }
            }
        }
    }
    Some(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matrix_market::MmFormat;
    use num_complex::Complex64;
    use proptest::prelude::*;

    fn header(field: MmField, symmetry: MmSymmetry) -> MmHeader {
        MmHeader {
            format: MmFormat::Coordinate,
            field,
            symmetry,
        }
    }

    fn triplets<T: Scalar>(e: &Entries<T>) -> Vec<(u32, u32, T)> {
        (0..e.len())
            .map(|k| (e.rows[k], e.cols[k], e.vals[k]))
            .collect()
    }

    #[test]
    fn tokens_end_at_the_first_control_byte_or_space() {
        let text = "0123456789abcdef0123456789\x7f\u{e9}x";
        for (c, k) in [
            (b' ', 0),
            (b'\n', 3),
            (b'\t', 8),
            (0, 15),
            (0x1f, 16),
            (b'\r', 25),
        ] {
            let mut b = text.as_bytes().to_vec();
            b[k] = c;
            for from in 0..=k {
                assert_eq!(token_end(&b, from), k, "{c} at {k}, from {from}");
            }
        }
        assert_eq!(token_end(text.as_bytes(), 3), text.len());
        assert_eq!(token_end(b"", 0), 0);
    }

    #[test]
    fn lines_comments_and_white_space() {
        let piece = "  1.5 \r\n\n% a comment: café\n\t-2e-3\x0c\n   % another\n7";
        let v: Vec<f64> = array_values(piece, MmField::Real).unwrap();
        assert_eq!(v, vec![1.5, -2e-3, 7.0]);
        let v: Vec<f64> = array_values("", MmField::Real).unwrap();
        assert!(v.is_empty());
        let v: Vec<f64> = array_values("-12\n+3\n", MmField::Integer).unwrap();
        assert_eq!(v, vec![-12.0, 3.0]);
    }

    #[test]
    fn what_the_serial_parser_may_take_is_given_up() {
        for piece in [
            "1.5 2\n",     // an extra token
            "1.5\x0b\n",   // vertical tab: white space to the serial parser
            "1.5\u{a0}\n", // so is a no-break space
            "inf\n",       // not finite
            "nan\n",       // not finite
            "1.0.0\n",     // not a number
            "1e400\n",     // overflows
            "1.8e308\n",   // rounds past f64::MAX
            "0x10\n",      // not a decimal number
        ] {
            assert!(
                array_values::<f64>(piece, MmField::Real).is_none(),
                "{piece:?}"
            );
        }
        assert!(array_values::<f32>("1e300\n", MmField::Real).is_none());
        assert!(array_values::<Complex64>("1\n", MmField::Complex).is_none());
        let h = header(MmField::Real, MmSymmetry::General);
        for piece in [
            "+1 1 1\n",                   // a sign before an index
            "1 1\n1.0\n",                 // the value on the next line
            "0 1 1\n",                    // a 0 index
            "4 1 1\n",                    // out of range
            "1 4 1\n",                    // out of range
            "1x 1 1\n",                   // not digits
            "00000000000000000001 1 1\n", // 20 digits
            "18446744073709551617 1 1\n", // beyond u64
        ] {
            assert!(
                coordinate_entries::<f64>(piece, h, 3, 3).is_none(),
                "{piece:?}"
            );
        }
        let sym = header(MmField::Real, MmSymmetry::Symmetric);
        assert!(coordinate_entries::<f64>("1 2 1\n", sym, 3, 3).is_none());
        let skew = header(MmField::Real, MmSymmetry::SkewSymmetric);
        assert!(coordinate_entries::<f64>("2 2 1\n", skew, 3, 3).is_none());
        let herm = header(MmField::Complex, MmSymmetry::Hermitian);
        assert!(coordinate_entries::<Complex64>("2 2 1 1\n", herm, 3, 3).is_none());
    }

    #[test]
    fn symmetric_storage_is_mirrored_in_place() {
        let piece = "2 1 1.5\n1 1 3\n3 2 -1\n";
        let sym = header(MmField::Real, MmSymmetry::Symmetric);
        let e = coordinate_entries::<f64>(piece, sym, 3, 3).unwrap();
        let want = [
            (1, 0, 1.5),
            (0, 1, 1.5),
            (0, 0, 3.0),
            (2, 1, -1.0),
            (1, 2, -1.0),
        ];
        assert_eq!(
            (triplets(&e), e.lines, e.ordered),
            (want.to_vec(), 3, false)
        );
        let skew = header(MmField::Integer, MmSymmetry::SkewSymmetric);
        let e = coordinate_entries::<f64>("2 1 5\n", skew, 2, 2).unwrap();
        assert_eq!(triplets(&e), vec![(1, 0, 5.0), (0, 1, -5.0)]);
        let herm = header(MmField::Complex, MmSymmetry::Hermitian);
        let e = coordinate_entries::<Complex64>("2 1 1 2\n1 1 4 0\n", herm, 2, 2).unwrap();
        let (z, w) = (Complex64::new(1.0, 2.0), Complex64::new(4.0, 0.0));
        assert_eq!(triplets(&e), vec![(1, 0, z), (0, 1, z.conj()), (0, 0, w)]);
        let pattern = header(MmField::Pattern, MmSymmetry::General);
        let e = coordinate_entries::<f64>("1 2\n2 1\n", pattern, 2, 2).unwrap();
        assert_eq!(
            (triplets(&e), e.ordered),
            (vec![(0, 1, 1.0), (1, 0, 1.0)], true)
        );
    }

    #[test]
    fn order_is_strictly_increasing_row_then_column() {
        let h = header(MmField::Real, MmSymmetry::General);
        let ordered = |piece: &str| coordinate_entries::<f64>(piece, h, 9, 9).unwrap().ordered;
        assert!(ordered("1 1 1\n1 3 1\n2 1 1\n9 9 1\n"));
        assert!(!ordered("1 3 1\n1 2 1\n")); // columns out of order
        assert!(!ordered("2 1 1\n1 5 1\n")); // rows out of order
        assert!(!ordered("1 1 1\n1 1 2\n")); // a duplicate
        let e = coordinate_entries::<f64>("3 4 1\n% x\n5 6 2\n", h, 9, 9).unwrap();
        assert_eq!((e.rows, e.cols), (vec![2, 4], vec![3, 5]));
        assert_eq!(coordinate_entries::<f64>("", h, 9, 9).unwrap().len(), 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any finite double written in any of the usual ways parses to the
        /// bits the standard library gives (the serial parser's).
        #[test]
        fn values_have_the_standard_librarys_bits(
            bits in any::<u64>(),
            form in 0usize..5,
            digits in 1usize..25,
        ) {
            let x = f64::from_bits(bits);
            prop_assume!(x.is_finite());
            let token = match form {
                0 => format!("{x:e}"),
                1 => format!("{x:?}"),
                2 => format!("{x:.*e}", digits),
                3 => format!("{:.*}", digits, x.abs().fract() * 1e3),
                _ => format!("{x:.*E}", digits),
            };
            // Rounding to fewer digits can carry a value near f64::MAX past
            // it ("1.8e308"): such a token is infinite, which the scan
            // refuses (`what_the_serial_parser_may_take_is_given_up`), so only
            // finite tokens compare here.
            prop_assume!(token.parse::<f64>().is_ok_and(f64::is_finite));
            let got: Vec<f64> = array_values(&format!("{token}\n"), MmField::Real).unwrap();
            prop_assert_eq!(got[0].to_bits(), token.parse::<f64>().unwrap().to_bits());
        }

        /// Tokens of the short-decimal form and around it (signs, points,
        /// exponents, up to 21 digits, values near 2^53 and powers near
        /// 10^±22) parse to the standard library's bits, or give up where
        /// it refuses them.
        #[test]
        fn short_decimals_have_the_standard_librarys_bits(
            token in "[+-]?[0-9]{0,21}(\\.[0-9]{0,21})?([eE][+-]?[0-9]{1,5})?",
            near in prop::sample::select(vec![
                "9007199254740992", "9007199254740993", "9007199254740991e-22",
                "1e22", "1e23", "123456789e-31", "0.000000000000000000001",
                "18446744073709551615", "-0", "-0.0e-0", "1.", ".5", "+.5e+1",
            ]),
        ) {
            for token in [token.as_str(), near].into_iter().filter(|t| !t.is_empty()) {
                let got = array_values::<f64>(&format!("{token}\n"), MmField::Real);
                let want = token.parse::<f64>().ok().filter(|x| x.is_finite());
                prop_assert_eq!(got.map(|v| v[0].to_bits()), want.map(f64::to_bits), "{}", token);
                if let Some(x) = short_decimal(token.as_bytes()) {
                    prop_assert_eq!(Some(x.to_bits()), token.parse::<f64>().ok().map(f64::to_bits));
                }
            }
        }

        /// Leading digits of any bytes, eight at a time or one by one, are
        /// the digits one by one.
        #[test]
        fn leading_digits_are_read_exactly(
            digits in "[0-9]{0,21}",
            after in prop::collection::vec(any::<u8>(), 0..10),
            lead in prop::collection::vec(any::<u8>(), 0..3),
        ) {
            let mut b = lead.clone();
            b.extend_from_slice(digits.as_bytes());
            b.extend_from_slice(&after);
            let pos = lead.len();
            let n = b[pos..].iter().take_while(|c| c.is_ascii_digit()).count();
            let value = b[pos..pos + n]
                .iter()
                .fold(0u64, |k, &c| k.wrapping_mul(10).wrapping_add(u64::from(c - b'0')));
            prop_assert_eq!(leading_digits(&b, pos), (value, n));
        }

        /// Index tokens read as `usize::from_str` reads them, or give up.
        #[test]
        fn indices_match_the_standard_library(token in "[0-9+]{1,22}") {
            let h = header(MmField::Pattern, MmSymmetry::General);
            let bound = u32::MAX as usize;
            let got = coordinate_entries::<f64>(&format!("{token} 1\n"), h, bound, 1);
            let want = token.parse::<usize>().ok().filter(|&k| k > 0 && k <= bound);
            match got {
                Some(e) => prop_assert_eq!(Some(e.rows[0] as usize + 1), want),
                None => prop_assert!(want.is_none() || token.starts_with('+') || token.len() > 19),
            }
        }
    }
}
