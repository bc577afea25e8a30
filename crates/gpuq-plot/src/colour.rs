//! Colours: the series palette and the perceptual colour map of heat maps.

use plotters::style::RGBColor;

/// Control points of the viridis colour map (Matplotlib's), at 0, 1/8, ..., 1:
/// perceptually uniform, monotone in brightness, readable in grey and by
/// colour-blind readers.
const VIRIDIS: [[u8; 3]; 9] = [
    [68, 1, 84],
    [71, 44, 122],
    [59, 81, 139],
    [44, 113, 142],
    [33, 144, 141],
    [39, 173, 129],
    [92, 200, 99],
    [170, 220, 50],
    [253, 231, 37],
];

/// The colour of a heat map's missing values (NaN): a light grey, unlike any
/// colour of [`viridis`].
pub const MISSING: [u8; 3] = [200, 200, 200];

/// Viridis at `s` in [0, 1] (clamped; NaN gives the low end), linearly
/// interpolated between its control points. O(1).
pub fn viridis(s: f64) -> [u8; 3] {
    let s = if s.is_nan() { 0.0 } else { s.clamp(0.0, 1.0) };
    let pos = s * (VIRIDIS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(VIRIDIS.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    std::array::from_fn(|c| (a[c] as f64 + f * (b[c] as f64 - a[c] as f64)).round() as u8)
}

/// The colours of a chart's series, in order (the Okabe-Ito palette for
/// colour-blind readers, without its yellow): blue, vermillion, bluish green,
/// reddish purple, orange, sky blue, black.
const PALETTE: [[u8; 3]; 7] = [
    [0, 114, 178],
    [213, 94, 0],
    [0, 158, 115],
    [204, 121, 167],
    [230, 159, 0],
    [86, 180, 233],
    [0, 0, 0],
];

/// The `k`-th colour of the series palette (cycling).
pub fn palette(k: usize) -> [u8; 3] {
    PALETTE[k % PALETTE.len()]
}

pub(crate) fn rgb(c: [u8; 3]) -> RGBColor {
    RGBColor(c[0], c[1], c[2])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viridis_ends_and_monotone_brightness() {
        assert_eq!(viridis(0.0), VIRIDIS[0]);
        assert_eq!(viridis(1.0), VIRIDIS[8]);
        assert_eq!(viridis(2.0), VIRIDIS[8]);
        assert_eq!(viridis(f64::NAN), VIRIDIS[0]);
        let luma = |c: [u8; 3]| 0.3 * c[0] as f64 + 0.59 * c[1] as f64 + 0.11 * c[2] as f64;
        let mut last = -1.0;
        for i in 0..=100 {
            let l = luma(viridis(i as f64 / 100.0));
            assert!(l >= last - 1.0, "brightness drops at {i}");
            last = l;
            assert_ne!(viridis(i as f64 / 100.0), MISSING);
        }
        assert_eq!(palette(0), palette(PALETTE.len()));
    }
}
