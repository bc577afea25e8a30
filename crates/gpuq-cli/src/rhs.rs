//! The right-hand side of a solve (`--rhs`, `--rhs-seed`) and what it tells
//! about the answer: with b = A x* for a known x*, the error ||x - x*|| / ||x*||
//! is reported beside the residual.

use gpuq_core::{Error, Result, Scalar};
use gpuq_sparse::reference::{random_vector, relative_error};
use gpuq_sparse::Csr;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// `--rhs`: a Matrix Market file, or how to make b.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RhsChoice {
    /// The generated problem's own b when it has one, else `Random`.
    Default,
    /// b = A x* with x* the seeded random vector (entries uniform in [-1, 1)).
    Random,
    /// b = 1 (x* unknown).
    Ones,
    /// b = A 1, so x* = 1 (the constant vector, which smoothed aggregation and
    /// the Monte Carlo estimators reproduce exactly: a degenerate test).
    A1,
    /// b read from a Matrix Market array file.
    File(PathBuf),
}

impl RhsChoice {
    /// `--rhs` as given: `random`, `ones`, `a1`, or a file (`./ones` for a
    /// file of that name); absent: [`RhsChoice::Default`].
    pub(crate) fn parse(arg: Option<&str>) -> Self {
        match arg {
            None => RhsChoice::Default,
            Some("random") => RhsChoice::Random,
            Some("ones") => RhsChoice::Ones,
            Some("a1") => RhsChoice::A1,
            Some(path) => RhsChoice::File(PathBuf::from(path)),
        }
    }

    /// The file `--rhs` names, if it names one.
    pub(crate) fn file(&self) -> Option<&Path> {
        match self {
            RhsChoice::File(path) => Some(path),
            _ => None,
        }
    }
}

/// What b is, as the report gives it (under `rhs`).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RhsInfo {
    /// `random` (b = A x*, x* seeded), `a1` (b = A 1), `ones` (b = 1),
    /// `problem` (the generated problem's own) or `file`.
    pub kind: &'static str,
    /// The seed of x* (`random` only).
    pub seed: Option<u64>,
    /// The file b was read from (`file` only).
    pub file: Option<String>,
}

/// For the distributed solve, whose ranks build their rows of b in place.
#[cfg(feature = "mpi")]
impl RhsInfo {
    /// What b is for a generated problem without a b of its own (a stencil
    /// built in place by each rank), as `choice` says; the file is added by
    /// [`RhsInfo::with_file`].
    pub(crate) fn generated(choice: &RhsChoice, seed: u64) -> Self {
        let (kind, seed) = match choice {
            RhsChoice::Default | RhsChoice::Random => ("random", Some(seed)),
            RhsChoice::A1 => ("a1", None),
            RhsChoice::Ones => ("ones", None),
            RhsChoice::File(_) => ("file", None),
        };
        RhsInfo {
            kind,
            seed,
            file: None,
        }
    }

    /// The same, naming the file b was read from.
    pub(crate) fn with_file(self, file: Option<&Path>) -> Self {
        RhsInfo {
            file: file.map(|f| f.display().to_string()),
            ..self
        }
    }

    /// Whether b = A x* for a known x* (`random`, `a1`).
    pub(crate) fn knows_solution(&self) -> bool {
        matches!(self.kind, "random" | "a1")
    }

    /// Entries `range` of x* (`random`: the seeded vector; `a1`: ones; ones
    /// otherwise, whose product b is then replaced). O(range.len()).
    pub(crate) fn solution<T: Scalar>(&self, range: std::ops::Range<usize>) -> Vec<T> {
        match (self.kind, self.seed) {
            ("random", Some(seed)) => random_vector(seed, range),
            _ => vec![T::one(); range.len()],
        }
    }

    /// What the report says about the answer `x` (the whole vector), with x*
    /// regenerated from the seed. O(n).
    pub(crate) fn outcome<T: Scalar>(&self, x: Option<&[T]>) -> RhsOutcome {
        let solution = match x {
            Some(x) if self.knows_solution() => Some(self.solution(0..x.len())),
            _ => None,
        };
        outcome_of(self, solution.as_deref(), x)
    }
}

/// The report's fields for the answer `x` against x* = `solution`.
fn outcome_of<T: Scalar>(info: &RhsInfo, solution: Option<&[T]>, x: Option<&[T]>) -> RhsOutcome {
    RhsOutcome {
        rhs: info.clone(),
        error: match (x, solution) {
            (Some(x), Some(s)) => Some(relative_error(x, s)),
            _ => None,
        },
    }
}

/// b, the solution x* when it is known, and what b is.
pub(crate) struct RightHandSide<T> {
    /// The right-hand side.
    pub b: Vec<T>,
    /// x* with b = A x*, when known (`random`, `a1`).
    pub solution: Option<Vec<T>>,
    /// What b is.
    pub info: RhsInfo,
}

impl<T: Scalar> RightHandSide<T> {
    /// b for `a` as `choice` says: `own` is the generated problem's own b
    /// (taken by [`RhsChoice::Default`]), `seed` seeds a random x*. Errors
    /// when a file's length differs from A's rows. O(nnz).
    pub(crate) fn make(
        a: &Csr<T>,
        own: Option<Vec<T>>,
        choice: &RhsChoice,
        seed: u64,
    ) -> Result<Self> {
        let n = a.nrows();
        let known = |kind, x: Vec<T>, seed| -> Result<Self> {
            Ok(RightHandSide {
                b: a.mul_vec(&x)?,
                solution: Some(x),
                info: RhsInfo {
                    kind,
                    seed,
                    file: None,
                },
            })
        };
        let given = |kind, b, file| RightHandSide {
            b,
            solution: None,
            info: RhsInfo {
                kind,
                seed: None,
                file,
            },
        };
        match (choice, own) {
            (RhsChoice::Default, Some(b)) => Ok(given("problem", b, None)),
            (RhsChoice::Default | RhsChoice::Random, _) => {
                known("random", random_vector(seed, 0..a.ncols()), Some(seed))
            }
            (RhsChoice::A1, _) => known("a1", vec![T::one(); a.ncols()], None),
            (RhsChoice::Ones, _) => Ok(given("ones", vec![T::one(); n], None)),
            (RhsChoice::File(path), _) => {
                let b = read_of_length(path, n)?;
                Ok(given("file", b, Some(path.display().to_string())))
            }
        }
    }

    /// What the report says about the answer `x` (the error against x* when
    /// known). O(n).
    pub(crate) fn outcome(&self, x: Option<&[T]>) -> RhsOutcome {
        outcome_of(&self.info, self.solution.as_deref(), x)
    }
}

/// The right-hand side in the Matrix Market file `path`; errors unless it
/// holds `n` entries.
pub(crate) fn read_of_length<T: Scalar>(path: &Path, n: usize) -> Result<Vec<T>> {
    let b: Vec<T> = gpuq_sparse::file::read_vector(path)?;
    if b.len() != n {
        return Err(Error::shape(
            "solve (right-hand side)",
            format!("{n} entries (the matrix has {n} rows)"),
            format!("{} entries in {}", b.len(), path.display()),
        ));
    }
    Ok(b)
}

/// The fields a solve report gains from its right-hand side.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct RhsOutcome {
    /// What b is.
    pub rhs: RhsInfo,
    /// ||x - x*|| / ||x*|| for the returned x, when x* is known and the solve
    /// returned an iterate.
    pub error: Option<f64>,
}

impl RhsOutcome {
    /// The report's line about b and the error.
    pub(crate) fn line(&self) -> String {
        let what = match (self.rhs.kind, self.rhs.seed, &self.rhs.file) {
            ("random", Some(seed), _) => format!("b = A x*, x* random (seed {seed})"),
            ("a1", _, _) => "b = A 1 (x* = 1)".to_string(),
            ("ones", _, _) => "b = 1".to_string(),
            ("file", _, Some(file)) => format!("b from {file}"),
            _ => "the problem's own b".to_string(),
        };
        match self.error {
            Some(e) => format!("right-hand side: {what}; error ||x - x*|| / ||x*||: {e:.3e}"),
            None => format!("right-hand side: {what}"),
        }
    }
}

/// A report and the fields of its right-hand side, serialised as one JSON
/// object.
#[derive(Serialize)]
pub(crate) struct WithRhs<'a, R: Serialize> {
    /// The solve's report.
    #[serde(flatten)]
    pub report: &'a R,
    /// b and the error.
    #[serde(flatten)]
    pub outcome: &'a RhsOutcome,
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuq_sparse::generators::laplace2d;

    #[test]
    fn each_choice_gives_its_b_and_solution() {
        let a = laplace2d::<f64>(4);
        let r = RightHandSide::make(&a, None, &RhsChoice::Default, 3).unwrap();
        assert_eq!(r.info.kind, "random");
        let x = r.solution.clone().unwrap();
        assert_eq!(r.b, a.mul_vec(&x).unwrap());
        assert_eq!(r.outcome(Some(&x)).error, Some(0.0));
        let own = RightHandSide::make(&a, Some(vec![2.0; 16]), &RhsChoice::Default, 3).unwrap();
        assert_eq!((own.info.kind, own.b[0]), ("problem", 2.0));
        assert!(own.outcome(Some(&x)).error.is_none());
        let a1 = RightHandSide::make(&a, None, &RhsChoice::A1, 3).unwrap();
        assert_eq!(a1.solution.unwrap(), vec![1.0; 16]);
        let ones = RightHandSide::make(&a, None, &RhsChoice::Ones, 3).unwrap();
        assert_eq!((ones.b, ones.solution), (vec![1.0; 16], None));
    }

    #[test]
    fn names_and_files_are_told_apart() {
        assert_eq!(RhsChoice::parse(Some("a1")), RhsChoice::A1);
        assert_eq!(
            RhsChoice::parse(Some("./ones")),
            RhsChoice::File("./ones".into())
        );
        assert_eq!(RhsChoice::parse(None), RhsChoice::Default);
    }

    #[cfg(feature = "mpi")]
    #[test]
    fn the_regenerated_solution_is_the_one_made() {
        let a = laplace2d::<f64>(5);
        let r = RightHandSide::make(&a, None, &RhsChoice::Random, 9).unwrap();
        let info = RhsInfo::generated(&RhsChoice::Default, 9);
        assert_eq!(Some(info.solution::<f64>(0..25)), r.solution);
        let x = vec![0.5; 25];
        assert_eq!(info.outcome(Some(&x)).error, r.outcome(Some(&x)).error);
    }
}
