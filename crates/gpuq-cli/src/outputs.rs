//! The output files a command will write, checked before it computes
//! anything: a path in a missing or read-only directory is an error at once,
//! not after the solve.

use crate::args::Command;
use crate::uq::UqCommand;
use gpuq_core::files::check_output_path;
use gpuq_core::Result;
use std::path::Path;

/// The files `command` writes (its `--out`, `--plot`, ... options).
fn outputs(command: &Command) -> Vec<&Path> {
    let files = match command {
        Command::Solve(a) => vec![&a.out, &a.plot],
        Command::Generate(a) => vec![&a.rhs_out, &a.solution_out, &a.mass_out, &a.coords_out],
        Command::Bidomain(a) => vec![&a.plot],
        Command::AmgInfo(a) => vec![&a.plot],
        Command::Uq(a) => match &a.command {
            UqCommand::Static(s) => vec![&s.plot],
            UqCommand::Sdof(s) => vec![&s.plot],
            UqCommand::Psd(s) => vec![&s.plot],
            UqCommand::Convolution(s) => vec![&s.plot],
            UqCommand::Expectation(_) => Vec::new(),
        },
        Command::Info | Command::Integrate(_) => Vec::new(),
    };
    let mut paths: Vec<&Path> = files.into_iter().flatten().map(|p| p.as_path()).collect();
    if let Command::Generate(a) = command {
        paths.push(&a.out);
    }
    paths
}

/// Errors unless every output file of `command` can be written
/// ([`check_output_path`]). O(outputs).
pub fn check(command: &Command) -> Result<()> {
    outputs(command).into_iter().try_for_each(check_output_path)
}
