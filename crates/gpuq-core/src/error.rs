//! The one error type of gpuq.

use crate::SolveReport;

/// Result alias used throughout gpuq.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in gpuq. Library code returns these instead of
/// panicking on user input; each variant says what is wrong and where.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Operands have incompatible dimensions.
    #[error("shape mismatch in {op}: expected {expected}, found {found}")]
    ShapeMismatch {
        /// The operation that found the mismatch (e.g. `"axpy"`, `"spmv"`).
        op: &'static str,
        /// The dimension(s) it needed.
        expected: String,
        /// The dimension(s) it was given.
        found: String,
    },

    /// A matrix violates a structural rule (index out of range, unsorted, NaN, ...).
    #[error("invalid matrix: {0}")]
    InvalidMatrix(String),

    /// A value is NaN or infinite where a finite value is required.
    #[error("non-finite value in {what} at index {index}")]
    NonFinite {
        /// What holds the value (e.g. `"right-hand side"`).
        what: String,
        /// Position of the first offending value.
        index: usize,
    },

    /// A text input (Matrix Market, CLI spec) could not be parsed.
    #[error("parse error {}at line {line}: {message}", in_file(.file))]
    Parse {
        /// The file parsed (empty for text not read from a file).
        file: String,
        /// 1-based line number of the offending line (0 if the input is empty).
        line: usize,
        /// What was expected and what was found.
        message: String,
    },

    /// An I/O error while reading or writing `path`.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file involved.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// An argument is out of its valid range (tolerance <= 0, unknown option value, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A method's precondition does not hold (e.g. the operator is not square, or a
    /// diagonal entry needed by Jacobi is zero).
    #[error("{method}: precondition violated: {reason}")]
    Precondition {
        /// The method that refused.
        method: &'static str,
        /// Why.
        reason: String,
    },

    /// An iterative method hit its iteration cap without meeting the tolerance.
    #[error("{} did not converge in {} iterations (relative residual {:.3e})", .0.method, .0.iterations, .0.relative_residual)]
    NotConverged(Box<SolveReport>),

    /// An iterative method broke down (a scalar it divides by vanished or turned
    /// non-finite) or stagnated (the quantity then starts with "stagnation").
    #[error("{method} {}", describe_breakdown(.quantity, *.iteration))]
    Breakdown {
        /// The method.
        method: &'static str,
        /// The scalar that vanished (e.g. `"p^H A p"`).
        quantity: &'static str,
        /// The iteration at which it vanished.
        iteration: usize,
        /// The state of the solve at that point (true residual of the iterate).
        report: Box<SolveReport>,
    },

    /// An integrand expression is malformed: a syntax error, an unknown name, a
    /// function given the wrong number of arguments, or an index outside 1..n.
    #[error("expression error at column {column}: {message}")]
    Expression {
        /// 1-based column (in characters) of the offending token.
        column: usize,
        /// What is wrong there.
        message: String,
    },

    /// An integrand returned NaN or an infinite value at `point` during an
    /// integration, which stopped there instead of returning a meaningless estimate.
    #[error("the integrand returned {value} at x = {point:?}; integration stopped")]
    IntegrandNotFinite {
        /// The value (NaN or +-infinity).
        value: f64,
        /// A point where it happened.
        point: Vec<f64>,
    },

    /// Run-time compilation of user device code (CUDA C through NVRTC, or its
    /// link with gpuq's PTX) failed; the message holds the compiler's log.
    #[error("device code did not compile: {0}")]
    Compile(String),

    /// No CUDA driver or no CUDA device could be found.
    #[error("no CUDA device: {0}")]
    NoCudaDevice(String),

    /// A problem needs more device memory than the device has free.
    #[error("{what} needs {} of device memory; the device has {} free of {}", gib(*.needed), gib(*.free), gib(*.total))]
    DeviceMemory {
        /// What was to be allocated (a solve of n unknowns, a vector, ...).
        what: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes free on the device when it was asked.
        free: u64,
        /// The device's total memory in bytes.
        total: u64,
    },

    /// An allocation whose size comes from input would not fit in the host's
    /// memory.
    #[error("{what} needs {} of host memory; {} are available", gib(*.needed), gib(*.available))]
    HostMemory {
        /// What was to be allocated (a matrix, a file's entries, ...).
        what: String,
        /// Bytes it needs.
        needed: u64,
        /// Bytes available.
        available: u64,
    },

    /// A backend operation failed on the device (launch, allocation, copy).
    #[error("device error: {0}")]
    Device(String),
}

impl Error {
    /// Convenience constructor for [`Error::ShapeMismatch`].
    pub fn shape(op: &'static str, expected: impl ToString, found: impl ToString) -> Self {
        Error::ShapeMismatch {
            op,
            expected: expected.to_string(),
            found: found.to_string(),
        }
    }

    /// Convenience constructor for [`Error::Parse`].
    pub fn parse(line: usize, message: impl Into<String>) -> Self {
        Error::Parse {
            file: String::new(),
            line,
            message: message.into(),
        }
    }

    /// The same error, naming `file` when it is a parse error (other errors
    /// pass unchanged): for readers of files whose parsers see only text.
    pub fn in_file(self, file: &std::path::Path) -> Self {
        match self {
            Error::Parse { line, message, .. } => Error::Parse {
                file: file.display().to_string(),
                line,
                message,
            },
            other => other,
        }
    }

    /// The solve report carried by [`Error::NotConverged`] and [`Error::Breakdown`], if any.
    pub fn report(&self) -> Option<&SolveReport> {
        match self {
            Error::NotConverged(r) => Some(r),
            Error::Breakdown { report, .. } => Some(report),
            _ => None,
        }
    }
}

/// Bytes as GiB (or MiB below 1 GiB) with three significant digits.
fn gib(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.3} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.3} MiB", b / (1u64 << 20) as f64)
    }
}

/// The message of [`Error::Breakdown`] after the method's name.
/// `in FILE ` for a parse error of a file, nothing otherwise.
fn in_file(file: &str) -> String {
    if file.is_empty() {
        String::new()
    } else {
        format!("in {file} ")
    }
}

fn describe_breakdown(quantity: &str, iteration: usize) -> String {
    if quantity.starts_with("stagnation") || quantity.starts_with("interrupted") {
        format!("stopped at iteration {iteration}: {quantity}")
    } else {
        format!("broke down at iteration {iteration}: {quantity} vanished or is not finite")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_memory_names_what_it_needs_and_what_there_is() {
        let e = Error::DeviceMemory {
            what: "this solve (10 unknowns)".into(),
            needed: 3 << 30,
            free: 512 << 20,
            total: 80 << 30,
        };
        assert_eq!(
            e.to_string(),
            "this solve (10 unknowns) needs 3.000 GiB of device memory; the device has 512.000 MiB free of 80.000 GiB"
        );
    }
}
