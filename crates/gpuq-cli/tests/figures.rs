//! End-to-end tests of the figures: every `--plot` and `--plot` of the CLI
//! writes a figure with its text (an SVG's `<text>` elements hold the title,
//! the axes' labels and the legend), and the same run writes the same bytes.

mod common;
use common::gpuq;
use std::path::{Path, PathBuf};
use std::process::Output;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gpuq-cli-figures-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn ok(o: &Output) {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// Runs `args` with `--plot`-like option `flag` writing `file` in `d`,
/// expecting success; returns the file's path.
fn figure(d: &Path, args: &[&str], flag: &str, file: &str) -> PathBuf {
    let path = d.join(file);
    let mut all = args.to_vec();
    all.extend_from_slice(&[flag, path.to_str().unwrap()]);
    ok(&gpuq(&all));
    path
}

/// The trimmed contents of every `<text>` element of the SVG at `path`.
fn svg_texts(path: &Path) -> Vec<String> {
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(svg.starts_with("<svg"), "{} is not an SVG", path.display());
    let mut out = Vec::new();
    let mut rest = svg.as_str();
    while let Some(start) = rest.find("<text") {
        let body = &rest[start..];
        let open = body.find('>').unwrap() + 1;
        let close = body.find("</text>").unwrap();
        out.push(body[open..close].trim().to_string());
        rest = &body[close..];
    }
    out
}

fn has_all(texts: &[String], wanted: &[&str]) {
    for w in wanted {
        assert!(
            texts.iter().any(|t| t.contains(w)),
            "no <text> with '{w}' in {texts:?}"
        );
    }
}

/// Runs the same command twice into two PNG files and checks they are one
/// PNG, byte for byte.
fn same_png_twice(d: &Path, args: &[&str], flag: &str) {
    let a = figure(d, args, flag, "first.png");
    let b = figure(d, args, flag, "second.png");
    let (a, b) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    assert_eq!(&a[1..4], b"PNG");
    assert!(a == b, "{args:?}: two runs wrote different PNGs");
}

#[test]
fn solve_plot_draws_the_residual_history() {
    let d = dir("solve");
    let args = [
        "solve",
        "--generate",
        "laplace2d:16",
        "--precond",
        "jacobi",
        "--json",
    ];
    let path = d.join("r.svg");
    let mut all = args.to_vec();
    all.extend_from_slice(&["--plot", path.to_str().unwrap()]);
    let o = gpuq(&all);
    ok(&o);
    // With --json stdout stays one JSON report; the plot line goes to stderr.
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "converged");
    assert!(String::from_utf8_lossy(&o.stderr).contains("residual history"));
    let texts = svg_texts(&path);
    has_all(
        &texts,
        &[
            "pcg (jacobi) on laplace2d:16, n = 256: converged after",
            "iteration",
            "relative residual ‖b − A x‖ / ‖b‖",
            "recurrence residual",
            "true residual at the end",
            "tolerance (1.0e-8)",
            "10⁻⁸",
        ],
    );
    same_png_twice(&d, &args, "--plot");

    // The AMG path, a solve that does not converge (exit 3, the figure
    // written all the same), MCSA; mc-forward does not iterate.
    let amg = figure(
        &d,
        &["solve", "--generate", "laplace2d:24", "--precond", "amg"],
        "--plot",
        "amg.svg",
    );
    has_all(&svg_texts(&amg), &["pcg (amg, f32 cycle) on laplace2d:24"]);
    let stuck = d.join("stuck.svg");
    let o = gpuq(&[
        "solve",
        "--generate",
        "laplace2d:30",
        "--max-iter",
        "5",
        "--plot",
        stuck.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(3));
    has_all(&svg_texts(&stuck), &["max iterations after 5 iterations"]);
    let mcsa = figure(
        &d,
        &[
            "solve",
            "--generate",
            "laplace1d:100:0.5",
            "--method",
            "mcsa",
            "--histories",
            "5000",
        ],
        "--plot",
        "mcsa.svg",
    );
    has_all(&svg_texts(&mcsa), &["true residual at the end"]);
    let o = gpuq(&[
        "solve",
        "--generate",
        "laplace1d:100:0.5",
        "--method",
        "mc-forward",
        "--plot",
        d.join("no.png").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("does not iterate"));
    assert!(!d.join("no.png").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn amg_info_plot_draws_the_levels() {
    let d = dir("amg");
    let args = ["amg-info", "--generate", "laplace2d:40"];
    let svg = figure(&d, &args, "--plot", "h.svg");
    has_all(
        &svg_texts(&svg),
        &[
            "AMG hierarchy of laplace2d:40 (sa,",
            "operator complexity",
            "level (0: the finest)",
            "rows, non-zeros",
            "rows",
            "non-zeros",
            "10³",
        ],
    );
    same_png_twice(&d, &args, "--plot");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn uq_plots_have_their_text_and_the_same_bytes_each_run() {
    let d = dir("uq");
    let sdof = [
        "uq",
        "sdof",
        "--samples",
        "200",
        "--duration",
        "1",
        "--hist-times",
        "0.5",
    ];
    let svg = figure(&d, &sdof, "--plot", "sdof.svg");
    has_all(
        &svg_texts(&svg),
        &[
            "SDOF oscillator, Monte Carlo over 200 samples",
            "time t (s)",
            "displacement x (model units)",
            "mean of x(t)",
            "mean ± 2 standard deviations",
        ],
    );
    // The histogram next to it, in the same format.
    has_all(
        &svg_texts(&d.join("sdof_hist_t50.svg")),
        &["x at t = 0.5 s", "samples per bin", "above the range)"],
    );
    same_png_twice(&d, &sdof, "--plot");

    let psd = figure(&d, &["uq", "psd", "--dofs", "16"], "--plot", "psd.svg");
    has_all(
        &svg_texts(&psd),
        &[
            "Response PSD",
            "angular frequency ω (rad/s)",
            "power spectral density (model units)",
            "tip displacement S_uu(ω)",
            "load S_ff(ω)",
        ],
    );
    let conv = figure(
        &d,
        &[
            "uq",
            "convolution",
            "--dofs",
            "8",
            "--steps",
            "64",
            "--samples",
            "4",
        ],
        "--plot",
        "conv.svg",
    );
    has_all(
        &svg_texts(&conv),
        &["Tip response", "tip displacement (model units)", "sample 3"],
    );
    let st = ["uq", "static", "--dofs", "16", "--samples", "200"];
    has_all(
        &svg_texts(&figure(&d, &st, "--plot", "static.svg")),
        &[
            "Static response at DOF 14: 200 samples",
            "displacement u[14] (model units)",
        ],
    );
    same_png_twice(&d, &st, "--plot");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn bidomain_map_has_axes_colour_bar_and_the_same_bytes_each_run() {
    let d = dir("bidomain");
    // The literature conductivities (--cv off): the calibrated stimulus would cover the sheet.
    let args = [
        "bidomain", "--grid", "8", "--steps", "10", "--dt", "0.1", "--cv", "off",
    ];
    let svg = figure(&d, &args, "--plot", "map.svg");
    has_all(
        &svg_texts(&svg),
        &[
            "Activation time, 2D sheet of 9 x 9 nodes",
            "x (mm)",
            "y (mm)",
            "activation time (ms)",
        ],
    );
    same_png_twice(&d, &args, "--plot");
    std::fs::remove_dir_all(&d).unwrap();
}
