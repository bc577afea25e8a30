//! Rigid-body modes from node coordinates: the near-null space of linear
//! elasticity (PETSc's `MatNullSpaceCreateRigidBody`, PyAMG's `B` for
//! elasticity), for smoothed aggregation's tentative prolongator.

use gpuq_core::{Error, Result};
use rayon::prelude::*;

/// The rigid-body modes of `d`-dimensional elasticity at the nodes whose
/// coordinates are the `d` columns of `coords` (each of length `nodes`; `d` =
/// 2 or 3), for `d` unknowns per node numbered node by node (unknown `d k + c`
/// is component `c` of node `k`): the `d` translations, then the rotations
/// about the coordinates' centroid: in 2D `(-y, x)`; in 3D about the x, y and
/// z axes, `(0, -z, y)`, `(z, 0, -x)`, `(-y, x, 0)`. 3 modes in 2D, 6 in 3D,
/// each of length `d nodes`. Centring makes the rotations orthogonal to the
/// translations over the whole mesh, so a floating structure's modes are
/// well conditioned whatever its position.
///
/// Errors when `d` is not 2 or 3, the columns differ in length or are empty,
/// or a coordinate is not finite. O(nodes).
pub fn rigid_body_modes(coords: &[Vec<f64>]) -> Result<Vec<Vec<f64>>> {
    let d = coords.len();
    let nodes = coords.first().map_or(0, Vec::len);
    if !(2..=3).contains(&d) {
        return Err(Error::InvalidArgument(format!(
            "rigid-body modes need 2 or 3 coordinate columns, found {d}"
        )));
    }
    if nodes == 0 || coords.iter().any(|c| c.len() != nodes) {
        return Err(Error::InvalidArgument(
            "node coordinates: the columns must be non-empty and of one length".into(),
        ));
    }
    if let Some((k, c)) = coords
        .iter()
        .enumerate()
        .find_map(|(c, col)| col.iter().position(|x| !x.is_finite()).map(|k| (k, c)))
    {
        return Err(Error::InvalidArgument(format!(
            "node coordinates: coordinate {} of node {} (1-based) is not finite",
            c + 1,
            k + 1
        )));
    }
    // A serial sum: Rayon's parallel sum adds in an order that depends on
    // the work stealing, and the modes (so the whole hierarchy) would differ
    // in their last bits from run to run.
    let centre: Vec<f64> = coords
        .iter()
        .map(|c| c.iter().sum::<f64>() / nodes as f64)
        .collect();
    let at = |k: usize, c: usize| coords[c][k] - centre[c];
    // Mode m at unknown d k + c.
    let value = |m: usize, k: usize, c: usize| -> f64 {
        if m < d {
            return f64::from(c == m);
        }
        if d == 2 {
            return if c == 0 { -at(k, 1) } else { at(k, 0) };
        }
        // rotation about axis a: e_a x p
        let a = m - 3;
        let (b, e) = ((a + 1) % 3, (a + 2) % 3);
        if c == b {
            -at(k, e)
        } else if c == e {
            at(k, b)
        } else {
            0.0
        }
    };
    let modes = if d == 2 { 3 } else { 6 };
    Ok((0..modes)
        .map(|m| {
            (0..d * nodes)
                .into_par_iter()
                .map(|r| value(m, r / d, r % d))
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_translations_and_rotations_about_the_centre() {
        let coords = vec![vec![0.0, 2.0], vec![0.0, 0.0], vec![1.0, 1.0]];
        let b = rigid_body_modes(&coords).unwrap();
        assert_eq!(b.len(), 6);
        assert_eq!(b[0], vec![1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);
        // rotation about z: (-y, x, 0) about the centre (1, 0, 1)
        assert_eq!(b[5], vec![0.0, -1.0, 0.0, 0.0, 1.0, 0.0]);
        let two = rigid_body_modes(&coords[..2]).unwrap();
        assert_eq!(two.len(), 3);
        assert_eq!(two[2], vec![0.0, -1.0, 0.0, 1.0]);
    }

    #[test]
    fn bad_coordinates_are_errors() {
        assert!(rigid_body_modes(&[vec![1.0]]).is_err());
        assert!(rigid_body_modes(&[vec![1.0], vec![1.0, 2.0]]).is_err());
        assert!(rigid_body_modes(&[vec![], vec![]]).is_err());
        let e = rigid_body_modes(&[vec![1.0, f64::NAN], vec![0.0, 0.0]]).unwrap_err();
        assert!(e.to_string().contains("node 2"), "{e}");
    }
}
