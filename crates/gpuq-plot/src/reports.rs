//! Figures of the solvers' reports: a solve's residual history and an AMG
//! hierarchy's levels.

use crate::{Axis, Chart, Legend, Series};
use gpuq_core::SolveReport;

/// The residual history of a solve (`gpuq solve --plot`), on a logarithmic
/// axis against the iterations: the recurrence's relative residual after each
/// iteration (`residual_history`, index 0 the initial guess), the true
/// relative residual ||b - A x|| / ||b|| of the returned iterate as a marker
/// at the last iteration ("true residual at the end"), and the tolerance as a
/// dashed horizontal line; the legend gives their values. `problem` names the
/// system in the title (empty: none). Zero residuals cannot be drawn on the
/// logarithmic axis; their values stay in the legend. O(iterations).
pub fn residual_chart(report: &SolveReport, problem: &str) -> Chart {
    let on = if problem.is_empty() {
        String::new()
    } else {
        format!(" on {problem}")
    };
    let title = format!(
        "{} ({}){on}, n = {}: {} after {} iteration{}",
        report.method,
        report.preconditioner,
        report.n,
        report.status.name().replace('_', " "),
        report.iterations,
        if report.iterations == 1 { "" } else { "s" }
    );
    let history: Vec<(f64, f64)> = if report.residual_history.is_empty() {
        vec![(report.iterations as f64, report.recurrence_residual)]
    } else {
        report
            .residual_history
            .iter()
            .enumerate()
            .map(|(k, r)| (k as f64, *r))
            .collect()
    };
    let last = report
        .iterations
        .max(report.residual_history.len().saturating_sub(1));
    Chart::new(
        title,
        Axis::new("iteration").integers(),
        Axis::log("relative residual ‖b − A x‖ / ‖b‖"),
    )
    .with(Series::line(
        format!(
            "recurrence residual (last {:.2e})",
            report.recurrence_residual
        ),
        history,
    ))
    .with(Series::markers(
        format!(
            "true residual at the end ({:.2e})",
            report.relative_residual
        ),
        [(last as f64, report.relative_residual)],
    ))
    .with(Series::horizontal(
        format!("tolerance ({:.1e})", report.tolerance),
        report.tolerance,
    ))
}

/// The levels of an AMG hierarchy (`gpuq amg-info --plot`): rows and
/// non-zeros per level as bars on a logarithmic axis; `levels` holds (rows,
/// non-zeros) from the finest level down, `title` says which hierarchy.
/// O(levels).
pub fn hierarchy_chart(title: &str, levels: &[(usize, usize)]) -> Chart {
    let n = levels.len().max(1) as f64;
    Chart::new(
        title,
        Axis::new("level (0: the finest)")
            .range(-0.5, n - 0.5)
            .integers(),
        Axis::log("rows, non-zeros"),
    )
    .with(Series::bars(
        "rows",
        levels
            .iter()
            .enumerate()
            .map(|(l, &(rows, _))| [l as f64 - 0.38, l as f64, rows as f64]),
    ))
    .with(Series::bars(
        "non-zeros",
        levels
            .iter()
            .enumerate()
            .map(|(l, &(_, nnz))| [l as f64, l as f64 + 0.38, nnz as f64]),
    ))
    .legend(Legend::UpperRight)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Format;

    fn texts(chart: &Chart) -> String {
        String::from_utf8(chart.render(Format::Svg).unwrap()).unwrap()
    }

    #[test]
    fn residual_chart_marks_the_true_residual_and_the_tolerance() {
        let report = SolveReport {
            method: "cg".into(),
            preconditioner: "jacobi".into(),
            n: 4096,
            iterations: 3,
            tolerance: 1e-8,
            relative_residual: 2e-9,
            recurrence_residual: 1e-9,
            residual_history: vec![1.0, 1e-3, 1e-6, 1e-9],
            converged: true,
            ..SolveReport::default()
        };
        let c = residual_chart(&report, "laplace2d:64");
        assert_eq!(c.frame().y, (1e-9, 1.0));
        let svg = texts(&c);
        for want in [
            "cg (jacobi) on laplace2d:64, n = 4096",
            "after 3 iterations",
            "iteration",
            "relative residual ‖b − A x‖ / ‖b‖",
            "recurrence residual (last 1.00e-9)",
            "true residual at the end (2.00e-9)",
            "tolerance (1.0e-8)",
        ] {
            assert!(svg.contains(want), "no '{want}'");
        }
        // No history: the last recurrence residual alone.
        let bare = SolveReport {
            residual_history: Vec::new(),
            ..report
        };
        let c = residual_chart(&bare, "");
        assert!(matches!(&c.series[0].data, crate::Data::Line(p) if p == &vec![(3.0, 1e-9)]));
    }

    #[test]
    fn hierarchy_chart_has_bars_per_level() {
        let c = hierarchy_chart("AMG", &[(10000, 50000), (1200, 9000), (90, 800)]);
        let f = c.frame();
        assert_eq!(f.x, (-0.5, 2.5));
        assert_eq!(f.y, (10.0, 1e5));
        let svg = texts(&c);
        assert!(svg.contains("rows, non-zeros") && svg.contains("level (0: the finest)"));
        assert!(svg.contains("10⁴"));
    }
}
