//! The README as a test: every `gpuq` command in its code blocks is run, in
//! README order in one scratch directory (so a `gpuq generate` writes the
//! files the next commands read), on small sizes, and checked for its exit
//! status and its key figures: a solve converged (or a Monte Carlo estimate
//! no worse than x = 0), no NaN or infinity printed, JSON that parses, every
//! output file written.
//!
//! The sizes are made small by [`SMALLER`], token by token; a command that
//! needs a GPU (`--backend cuda`, `--ptx`, `--cuda-source`) must, on a
//! machine without one, fail with one line naming the missing device.
//! `mpirun -n K target/release/gpuq ARGS` lines run `gpuq ARGS` in one
//! process here (`.ci/mpi-tests.sh` runs the distributed paths); `cargo`
//! and `bash` lines are what CI itself runs and are skipped. Nothing here
//! depends on the host's speed.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// Token replacements that shrink the README's sizes: `(flag, value,
/// small)` replaces `value` after `flag` (`""`: the value anywhere, as a
/// whole token). Every entry must be used, so the table follows the README.
const SMALLER: &[(&str, &str, &str)] = &[
    ("--generate", "laplace3d:100", "laplace3d:12"),
    ("", "laplace2d:200", "laplace2d:16"),
    ("--generate", "laplace3d:200", "laplace3d:12"),
    ("--generate", "laplace3d:64", "laplace3d:10"),
    ("--generate", "laplace3d:30", "laplace3d:10"),
    ("--generate", "laplace1d:1000000:0.5", "laplace1d:2000:0.5"),
    (
        "--generate",
        "laplace1d:100000:0.2222",
        "laplace1d:2000:0.2222",
    ),
    ("--generate", "convdiff2d:300:50", "convdiff2d:30:50"),
    ("--generate", "laplace2d:64", "laplace2d:16"),
    ("--generate", "elasticity2d:256", "elasticity2d:12"),
    ("", "helmholtz-cylinder:1", "helmholtz-cylinder:0"),
    ("", "helmholtz-cylinder:2", "helmholtz-cylinder:0"),
    ("", "helmholtz-cylinder:2:soft", "helmholtz-cylinder:0:soft"),
    ("", "elasticity3d:24", "elasticity3d:4"),
    ("", "elasticity2d:512", "elasticity2d:12"),
    ("", "bidomain2d:256", "bidomain2d:12"),
    ("", "beam:512", "beam:64"),
    ("--histories", "1000000", "20000"),
    ("--histories", "10000000", "1000000"),
    ("--grid", "128", "24"),
    ("--grid", "64", "24"),
    ("--steps", "300", "30"),
    ("--steps", "200", "20"),
    ("--steps", "100", "20"),
    ("--steps", "8192", "512"),
    ("--snapshot-every", "50", "10"),
    ("--samples", "1000000", "4000"),
    ("--samples", "100000", "4000"),
    ("--samples", "1000", "100"),
    ("--dofs", "1024", "64"),
    ("--freq-range", "0.1:300:1000", "0.1:300:40"),
    ("--freq-range", "0:200:401", "0:200:41"),
];

/// The repository's root: `GPUQ_REPO` when set (a packed test run from
/// another checkout, see `cargo xtask gpu-pack`), else this source tree's.
fn repository() -> PathBuf {
    std::env::var_os("GPUQ_REPO").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."),
        PathBuf::from,
    )
}

/// The README's commands, continuation lines joined, comments dropped.
fn readme_commands() -> Vec<String> {
    let path = repository().join("README.md");
    let text = std::fs::read_to_string(&path).expect("README.md is readable");
    let mut commands = Vec::new();
    let (mut fenced, mut lang, mut pending) = (false, String::new(), String::new());
    for line in text.lines() {
        if let Some(rest) = line.trim_start().strip_prefix("```") {
            fenced = !fenced;
            lang = rest.trim().to_string();
            continue;
        }
        if !fenced || !(lang.is_empty() || lang == "sh") {
            continue;
        }
        let code = strip_comment(line);
        let (code, continued) = match code.trim_end().strip_suffix('\\') {
            Some(c) => (c.to_string(), true),
            None => (code.to_string(), false),
        };
        pending.push_str(&code);
        pending.push(' ');
        if !continued {
            let command = pending.split_whitespace().collect::<Vec<_>>().join(" ");
            if !command.is_empty() {
                commands.push(command);
            }
            pending.clear();
        }
    }
    commands
}

/// `line` without a trailing `# comment` (a `#` outside quotes after a space).
fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '#' if !quoted && previous.is_whitespace() => return &line[..i],
            _ => {}
        }
        previous = c;
    }
    line
}

/// Splits a command into words: whitespace separates, single quotes group.
fn words(command: &str) -> Vec<String> {
    let (mut out, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    for c in command.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    out.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(word);
    }
    out
}

/// The `gpuq` arguments of a README command (`None`: not a gpuq command run
/// here), with its stdout redirect if it has one.
fn gpuq_arguments(command: &str) -> Option<(Vec<String>, Option<String>)> {
    let mut w = words(command);
    let start = if w.first()? == "gpuq" {
        1
    } else if command.starts_with("cargo run --release -p gpuq-cli -- ") {
        6
    } else if w.first()? == "mpirun" && w.get(3).is_some_and(|b| b.ends_with("/gpuq")) {
        4
    } else {
        return None;
    };
    let mut redirect = None;
    if let Some(i) = w.iter().position(|t| t == ">") {
        redirect = w.get(i + 1).cloned();
        w.truncate(i);
    }
    Some((w[start..].to_vec(), redirect))
}

/// `args` with the sizes of [`SMALLER`]; records which entries were used.
fn smaller(args: &[String], used: &mut HashSet<usize>) -> Vec<String> {
    let mut out = args.to_vec();
    for i in 0..out.len() {
        let flag = if i > 0 { args[i - 1].as_str() } else { "" };
        if let Some((k, (_, _, small))) = SMALLER
            .iter()
            .enumerate()
            .find(|(_, (f, v, _))| *v == args[i] && (f.is_empty() || *f == flag))
        {
            used.insert(k);
            out[i] = small.to_string();
        }
    }
    out
}

/// Whether the command needs a GPU.
fn needs_gpu(args: &[String]) -> bool {
    args.windows(2)
        .any(|w| w[0] == "--backend" && w[1] == "cuda")
        || args.iter().any(|a| a == "--ptx" || a == "--cuda-source")
}

/// The files and directories the command writes (the values of its output
/// options), which must exist afterwards.
fn outputs(args: &[String]) -> Vec<String> {
    const OUT: &[&str] = &[
        "--out",
        "--rhs-out",
        "--mass-out",
        "--coords-out",
        "--solution-out",
        "--plot",
        "--png",
        "--vtk",
    ];
    args.windows(2)
        .filter(|w| OUT.contains(&w[0].as_str()))
        .map(|w| w[1].clone())
        .collect()
}

/// Whether this machine has a CUDA device (`gpuq info` says so).
fn has_gpu(bin: &Path) -> bool {
    let o = Command::new(bin)
        .arg("info")
        .output()
        .expect("gpuq info runs");
    let text = String::from_utf8_lossy(&o.stdout).to_string();
    text.lines()
        .any(|l| l.trim_start().starts_with("cuda") && l.contains(" available"))
        && !text.contains("not available")
}

/// Checks one command's result: its exit status and its key figures.
fn check(command: &str, args: &[String], o: &Output, dir: &Path, gpu: bool) {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let what = format!("`{command}` (run as gpuq {})", args.join(" "));
    if needs_gpu(args) && !gpu {
        assert_eq!(o.status.code(), Some(1), "{what}: stderr {stderr}");
        assert!(
            stderr.trim_end().lines().count() == 1 && stderr.contains("no CUDA device"),
            "{what}: without a GPU, one line naming the missing device: {stderr}"
        );
        return;
    }
    assert!(
        o.status.success(),
        "{what}: exit {:?}\nstdout: {stdout}\nstderr: {stderr}",
        o.status.code()
    );
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
    let lower = stdout.to_lowercase();
    for word in ["nan", "inf"] {
        assert!(!has_word(&lower, word), "{what}: prints {word}: {stdout}");
    }
    if args.iter().any(|a| a == "--json") {
        let v: serde_json::Value = serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{what}: JSON does not parse ({e}): {stdout}"));
        if let Some(c) = v.get("converged") {
            assert_eq!(c, true, "{what}: not converged");
        }
    } else if args.first().is_some_and(|a| a == "solve") {
        assert!(
            stdout.contains("converged: true") || stdout.contains("status: estimate"),
            "{what}: {stdout}"
        );
    }
    for file in outputs(args) {
        let path = dir.join(&file);
        assert!(path.exists(), "{what}: wrote no {file}");
        if path.is_file() {
            assert!(
                std::fs::metadata(&path).unwrap().len() > 0,
                "{what}: {file} is empty"
            );
        }
    }
}

/// Whether `text` has `word` as a word (a value such as `nan`), not inside
/// another word.
fn has_word(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[test]
fn every_readme_command_runs_on_small_sizes() {
    let bin: PathBuf = std::env::var_os("GPUQ_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_gpuq").into())
        .into();
    let gpu = has_gpu(&bin);
    let dir = std::env::temp_dir().join(format!("gpuq-readme-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // the README's paths into the repository (examples/...) resolve from here
    let examples = repository().join("examples");
    std::os::unix::fs::symlink(examples, dir.join("examples")).unwrap();
    let mut used = HashSet::new();
    let mut ran = 0;
    for command in readme_commands() {
        let Some((args, redirect)) = gpuq_arguments(&command) else {
            let known = ["git clone", "cargo ", "bash .ci/"];
            assert!(
                known.iter().any(|k| command.starts_with(k)),
                "README command neither run here nor known to CI: `{command}`"
            );
            continue;
        };
        let args = smaller(&args, &mut used);
        let o = Command::new(&bin)
            .args(&args)
            .current_dir(&dir)
            .env("GPUQ_CACHE_DIR", dir.join("cache"))
            .stdin(Stdio::null())
            .output()
            .expect("gpuq runs");
        if let Some(file) = redirect {
            std::fs::write(dir.join(file), &o.stdout).unwrap();
        }
        check(&command, &args, &o, &dir, gpu);
        ran += 1;
    }
    let unused: Vec<_> = (0..SMALLER.len()).filter(|k| !used.contains(k)).collect();
    assert!(
        unused.is_empty(),
        "size replacements no README command uses: {:?}",
        unused.iter().map(|&k| SMALLER[k]).collect::<Vec<_>>()
    );
    assert!(ran > 40, "only {ran} README commands found");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_harness_splits_and_shrinks_as_a_shell_would() {
    assert_eq!(
        words("gpuq integrate --expr 'x1^2 * x2' --dim 2"),
        ["gpuq", "integrate", "--expr", "x1^2 * x2", "--dim", "2"]
    );
    assert_eq!(strip_comment("gpuq info   # version"), "gpuq info   ");
    assert_eq!(strip_comment("--expr 'a # b'"), "--expr 'a # b'");
    let (args, redirect) = gpuq_arguments("gpuq bidomain --json > run.json").unwrap();
    assert_eq!(
        (args, redirect),
        (
            vec!["bidomain".to_string(), "--json".into()],
            Some("run.json".into())
        )
    );
    let (args, _) =
        gpuq_arguments("mpirun -n 4 target/release/gpuq solve --generate laplace3d:100").unwrap();
    let mut used = HashSet::new();
    assert_eq!(smaller(&args, &mut used)[2], "laplace3d:12");
    assert!(has_word("the last at nan ms", "nan") && !has_word("finance, nanos", "nan"));
    assert!(has_word("rms inf", "inf") && !has_word("info: -infinity", "inf"));
}
