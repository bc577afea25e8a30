//! Value parsers for options whose values are names with optional parameters
//! (`gmres:50`, `sell:32:1`, `chebyshev:2`, `gauss-legendre:8`): clap checks the name and
//! lists the names in `--help` and in its error, the parameters are checked where the
//! value is interpreted.

use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use std::ffi::OsStr;

/// A value `NAME` or `NAME:PARAMETERS`, NAME one of a fixed list.
#[derive(Clone, Debug)]
pub struct Named {
    names: Vec<PossibleValue>,
}

/// The parser of `NAME[:PARAMETERS]` values, NAME one of `names` or of the `hidden`
/// spellings (accepted, not listed).
pub fn named(names: &[&'static str], hidden: &[&'static str]) -> Named {
    let shown = names.iter().map(|&n| PossibleValue::new(n));
    let hidden = hidden.iter().map(|&n| PossibleValue::new(n).hide(true));
    Named {
        names: shown.chain(hidden).collect(),
    }
}

/// `gpuq solve --method`: the Krylov methods and the Monte Carlo ones.
pub fn solve_method() -> Named {
    let monte_carlo = ["mc-forward", "mc-adjoint", "mcsa"];
    named(
        &[gpuq_krylov::Method::NAMES, &monte_carlo].concat(),
        &["pcg"],
    )
}

/// `gpuq solve --precond`: the Krylov preconditioners and AMG.
pub fn preconditioner() -> Named {
    named(
        &[gpuq_krylov::Preconditioner::NAMES, &["amg"]].concat(),
        &[],
    )
}

/// `--layout` of `gpuq solve` and `gpuq bidomain`: `auto` or a storage layout.
pub fn layout() -> Named {
    named(&[&["auto"], gpuq_sparse::Layout::NAMES].concat(), &["bsr2"])
}

/// `gpuq amg-info --layout`: a storage layout.
pub fn fixed_layout() -> Named {
    named(gpuq_sparse::Layout::NAMES, &["bsr2"])
}

/// `--amg-smoother` and `--amg-coarse-smoother`.
pub fn smoother() -> Named {
    named(gpuq_amg::Smoother::NAMES, &["l1-jacobi", "gauss-seidel"])
}

/// `gpuq integrate --method`.
pub fn cubature_method() -> Named {
    named(gpuq_cubature::Method::NAMES, &[])
}

impl TypedValueParser for Named {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<String, clap::Error> {
        let text = value.to_string_lossy();
        let name = text.split(':').next().unwrap_or_default();
        // The name alone goes through clap's own parser, so the error is clap's usual one:
        // "invalid value 'X' for '--OPTION' [possible values: ...]".
        PossibleValuesParser::new(self.names.clone()).parse_ref(cmd, arg, OsStr::new(name))?;
        Ok(text.into_owned())
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.names.iter().cloned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str) -> Result<String, clap::Error> {
        let cmd = clap::Command::new("t");
        named(&["gmres", "cg"], &["pcg"]).parse_ref(&cmd, None, OsStr::new(value))
    }

    #[test]
    fn a_name_with_or_without_parameters_is_taken_whole() {
        assert_eq!(parse("cg").unwrap(), "cg");
        assert_eq!(parse("gmres:50").unwrap(), "gmres:50");
        assert_eq!(parse("pcg").unwrap(), "pcg");
    }

    #[test]
    fn an_unknown_name_is_refused_with_the_list() {
        let message = parse("ilu:0").unwrap_err().to_string();
        assert!(message.contains("'ilu'"), "{message}");
        assert!(
            message.contains("gmres") && message.contains("cg"),
            "{message}"
        );
        assert!(
            !message.contains("pcg"),
            "hidden spellings are not listed: {message}"
        );
    }
}
