//! Conduction velocity calibration on the CPU: the targets met within 5% for
//! both membrane models at 0.1 and 0.2 mm, the backend's own time stepping on
//! a thin strip conducting at the calibrated speed, the cache, and bad input
//! as errors (debug builds: a few seconds in all).

use gpuq_bidomain::calibrate::{cable_cv, strip_cv, Direction, StripOutcome};
use gpuq_bidomain::{
    calibrate, sheet_cv, AlievPanfilov, BidomainConfig, CalibrationOptions, CvTarget, Membrane,
    MitchellSchaeffer, Tissue,
};
use gpuq_core::Error;
use gpuq_cpu::CpuBackend;

/// A run's configuration for spacing `h` (mm), step `dt` (ms) and `model`.
fn config(model: Membrane, h: f64, dt: f64) -> BidomainConfig {
    let mut tissue = Tissue::square(8).unwrap();
    tissue.h = h;
    let mut c = BidomainConfig::new(tissue);
    c.dt = dt;
    c.ionic = model;
    c
}

fn models() -> [Membrane; 2] {
    [
        AlievPanfilov::STANDARD.into(),
        MitchellSchaeffer::STANDARD.into(),
    ]
}

fn within(cv: f64, target: f64, tol: f64) -> bool {
    (cv / target - 1.0).abs() <= tol
}

#[test]
fn calibrated_velocities_meet_the_targets_at_two_resolutions_for_both_models() {
    let target = CvTarget::default();
    for model in models() {
        for h in [0.1, 0.2] {
            let c = config(model, h, 0.05);
            let cal = calibrate(&c, target, &CalibrationOptions::default()).unwrap();
            let what = format!("{} at {h} mm", model.name());
            println!(
                "{what}: {:.4} / {:.4} m/s, conductivities x {:.3} / {:.3}, {} cable runs",
                cal.cv_along_m_s,
                cal.cv_across_m_s,
                cal.scale_along,
                cal.scale_across,
                cal.trials.len()
            );
            // The calibration stops at 1%; the brief's bound is 5%.
            assert!(within(cal.cv_along_m_s, 0.6, 0.01), "{what}: {cal:?}");
            assert!(within(cal.cv_across_m_s, 0.2, 0.01), "{what}: {cal:?}");
            assert!(cal.trials.len() <= 10 && !cal.cached);
            assert_eq!((cal.dx_mm, cal.dt_ms), (h, 0.05));
            // The anisotropy structure is kept: each direction's intra- to
            // extracellular ratio is the literature's.
            let t = &c.tissue;
            let ratio = |a: f64, b: f64| a / b;
            assert!(
                (ratio(cal.sigma_i.longitudinal, cal.sigma_e.longitudinal)
                    - ratio(t.sigma_i.longitudinal, t.sigma_e.longitudinal))
                .abs()
                    < 1e-12
            );
            assert!(
                (ratio(cal.sigma_i.transverse, cal.sigma_e.transverse)
                    - ratio(t.sigma_i.transverse, t.sigma_e.transverse))
                .abs()
                    < 1e-12
            );
            // Measured again, independently of the calibration's runs, on the
            // calibrated tissue: within 5% of the targets.
            let run = cal.apply(c.clone());
            assert_eq!(run.tissue.sigma_i, cal.sigma_i);
            assert!(run.stimulus.radius >= c.stimulus.radius);
            for (direction, goal, length) in [
                (Direction::Along, 0.6, 60.0),
                (Direction::Across, 0.2, 20.0),
            ] {
                let StripOutcome::Measured(cv) = cable_cv(&run, direction, length, 400.0).unwrap()
                else {
                    panic!("{what}: no CV {direction:?}");
                };
                assert!(within(cv, goal, 0.05), "{what} {direction:?}: {cv}");
            }
        }
    }
}

/// The calibration's cable and the backend's time stepping agree: a thin 2D
/// strip run by `Simulation` on the CPU backend, with the calibrated
/// conductivities (and the widened stimulus), conducts within 5% of the
/// targets and within 1% of the cable of the same length. Mitchell-Schaeffer's
/// fronts are short, so strips of 20 ms times the target are long enough;
/// Aliev-Panfilov's take 60 ms (36 mm along). 0.1 ms steps.
#[test]
fn thin_strips_on_the_cpu_backend_conduct_at_the_calibrated_speed() {
    let cpu = CpuBackend::new();
    let ms: Membrane = MitchellSchaeffer::STANDARD.into();
    let ap: Membrane = AlievPanfilov::STANDARD.into();
    for (model, h, strip_ms) in [(ms, 0.1, 20.0), (ms, 0.2, 20.0), (ap, 0.2, 60.0)] {
        let c = config(model, h, 0.1);
        let run = calibrate(&c, CvTarget::default(), &CalibrationOptions::default())
            .unwrap()
            .apply(c);
        for (direction, goal) in [(Direction::Along, 0.6), (Direction::Across, 0.2)] {
            let length = strip_ms * goal;
            let strip = strip_cv(&cpu, &run, direction, length, 200.0).unwrap();
            let cable = cable_cv(&run, direction, length, 200.0).unwrap();
            let what = format!("{} {h} mm {direction:?}", model.name());
            let (StripOutcome::Measured(s), StripOutcome::Measured(k)) = (strip, cable) else {
                panic!("{what}: {strip:?} {cable:?}");
            };
            println!("{what}: strip {s:.4}, cable {k:.4} m/s");
            assert!(within(s, goal, 0.05), "{what}: {s}");
            assert!(within(s, k, 0.01), "{what}: strip {s} cable {k}");
        }
    }
}

#[test]
fn results_are_cached_per_input() {
    let c = config(MitchellSchaeffer::STANDARD.into(), 0.2, 0.1);
    let target = CvTarget {
        along: 0.5,
        across: 0.25,
    };
    let options = CalibrationOptions::default();
    let first = calibrate(&c, target, &options).unwrap();
    let second = calibrate(&c, target, &options).unwrap();
    assert!(second.cached);
    assert_eq!(first.sigma_i, second.sigma_i);
    assert_eq!(first.trials, second.trials);
    // Another time step is another calibration.
    let other = calibrate(&config(c.ionic, 0.2, 0.05), target, &options).unwrap();
    assert!(!other.cached);
}

#[test]
fn bad_targets_and_unreachable_velocities_are_errors() {
    let c = config(AlievPanfilov::STANDARD.into(), 0.2, 0.1);
    let options = CalibrationOptions::default();
    for (along, across) in [
        (0.0, 0.2),
        (-0.6, 0.2),
        (f64::NAN, 0.2),
        (0.6, f64::INFINITY),
    ] {
        let e = calibrate(&c, CvTarget { along, across }, &options).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    for bad in [
        CalibrationOptions {
            tolerance: 0.0,
            ..options
        },
        CalibrationOptions {
            max_runs: 0,
            ..options
        },
        CalibrationOptions {
            accept: 0.005,
            ..options
        },
        CalibrationOptions {
            cable_ms: f64::NAN,
            ..options
        },
    ] {
        assert!(calibrate(&c, CvTarget::default(), &bad).is_err());
    }
    // One run cannot reach 1% (it is at the literature conductivities): the
    // error says so, with the closest run; with Aliev-Panfilov the wave at
    // the literature conductivities (0.12 m/s) is too slow to be measured.
    let one = CalibrationOptions {
        max_runs: 1,
        ..options
    };
    let e = calibrate(&c, CvTarget::default(), &one).unwrap_err();
    assert!(e.to_string().contains("never crossed"), "{e}");
    let ms = config(MitchellSchaeffer::STANDARD.into(), 0.2, 0.1);
    let e = calibrate(&ms, CvTarget::default(), &one).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, Error::Precondition { .. }), "{text}");
    assert!(
        text.contains("not reached") && text.contains("closest"),
        "{text}"
    );
    // No stimulus: nothing to measure.
    let mut quiet = c.clone();
    quiet.stimulus.current = 0.0;
    let e = calibrate(&quiet, CvTarget::default(), &options).unwrap_err();
    assert!(e.to_string().contains("does not excite"), "{e}");
}

#[test]
fn sheet_velocities_come_from_the_edges_through_the_stimulus() {
    let tissue = Tissue::square(30).unwrap();
    let [gx, gy, _] = tissue.grid();
    // A wave at 0.5 m/s along x and 0.25 m/s along y.
    let act: Vec<f64> = (0..gx * gy)
        .map(|k| {
            let [x, y, _] = tissue.coordinates(k);
            (x / 0.5).max(y / 0.25)
        })
        .collect();
    let [along, across] = sheet_cv(&tissue, &act, 0.5).unwrap();
    assert!((along.unwrap() - 0.5).abs() < 1e-9 && (across.unwrap() - 0.25).abs() < 1e-9);
    // Not yet across: None there.
    let mut partial = act.clone();
    partial[20 * gx] = f64::NAN;
    assert_eq!(sheet_cv(&tissue, &partial, 0.5).unwrap()[1], None);
    // Fibres not along x: neither.
    let turned = Tissue {
        fibre_angle: 0.3,
        ..tissue
    };
    assert_eq!(sheet_cv(&turned, &act, 0.5).unwrap(), [None, None]);
    assert!(sheet_cv(&tissue, &act[1..], 0.5).is_err());
    // A stimulus reaching the first point (a third of 3 mm): no velocity.
    assert_eq!(sheet_cv(&tissue, &act, 1.0).unwrap(), [None, None]);
}
