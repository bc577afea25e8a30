//! The time stepper on small grids (debug builds: a few seconds in all).

use gpuq_bidomain::{amg, amg_options, block_jacobi, BidomainConfig, Simulation, Stimulus, Tissue};
use gpuq_cpu::CpuBackend;
use gpuq_sparse::Layout;
use std::cell::Cell;

/// A 1.6 mm square (16 x 16 cells) with 0.1 ms steps and solves to 1e-6.
fn small_sheet() -> BidomainConfig {
    let mut c = BidomainConfig::new(Tissue::square(16).unwrap());
    c.dt = 0.1;
    c.solver.rtol = 1e-6;
    c
}

#[test]
fn the_front_moves_away_along_and_across_the_fibres() {
    let backend = CpuBackend::new();
    let config = small_sheet();
    let g = 17;
    let mut sim = Simulation::new(&backend, config, &mut |b, a| block_jacobi(b, a)).unwrap();
    let report = sim.run(100, &mut |_| {}).unwrap();
    assert_eq!(report.steps.len(), 100);
    assert!((sim.time() - 10.0).abs() < 1e-9);
    let state = sim.state().unwrap();
    let act = &state.activation;
    // Every node along the bottom edge (the fibre direction) is activated, in
    // order of its distance from the stimulus.
    let row: Vec<f64> = act[..g].to_vec();
    assert!(row.iter().all(|t| !t.is_nan()), "{row:?}");
    assert!(row.windows(2).all(|w| w[0] <= w[1]), "{row:?}");
    assert!(row[g - 1] > row[0] + 1.0);
    // The stimulated corner fires first.
    let first = act
        .iter()
        .filter(|t| !t.is_nan())
        .fold(f64::INFINITY, |m, &t| m.min(t));
    let stimulated_max = act
        .iter()
        .zip(sim.stimulated())
        .filter(|(_, &s)| s)
        .fold(0.0f64, |m, (&t, _)| m.max(t));
    assert!(stimulated_max < row[g - 1] && first >= 0.0);
    // Along the fibres the wave is faster than across them: the node 1.2 mm
    // up the left edge activates later than the node 1.2 mm along the bottom.
    let across = act[12 * g];
    assert!(
        across.is_nan() || across > row[12],
        "{across} vs {}",
        row[12]
    );
    // No blow-up: v_m stays in the model's range, phi_e has zero mean.
    let (lo, hi) = state
        .vm
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    assert!(lo > -90.0 && hi < 40.0 && hi > 0.0, "v_m in [{lo}, {hi}]");
    let mean = state.phi_e.iter().sum::<f64>() / state.phi_e.len() as f64;
    assert!(mean.abs() < 1e-9, "mean phi_e = {mean}");
    assert!(report.activated_fraction > 0.2 && report.activated_fraction <= 1.0);
    assert!(report.last_activation_ms <= 10.0);
}

#[test]
fn the_preconditioner_is_built_once_and_solves_are_warm_started() {
    let backend = CpuBackend::new();
    let mut config = small_sheet();
    // No stimulus: the tissue stays at rest, and the previous solution (the
    // rest state) already solves every step's system, so a warm-started solve
    // takes no iteration.
    config.stimulus = Stimulus {
        current: 0.0,
        ..Stimulus::default()
    };
    let builds = Cell::new(0);
    let mut sim = Simulation::new(&backend, config, &mut |b, a| {
        builds.set(builds.get() + 1);
        block_jacobi(b, a)
    })
    .unwrap();
    let report = sim.run(5, &mut |_| {}).unwrap();
    assert_eq!(builds.get(), 1);
    assert_eq!(report.total_iterations, 0, "{:?}", report.steps);
    let state = sim.state().unwrap();
    assert!(state.vm.iter().all(|&v| (v + 80.0).abs() < 1e-9));
    assert!(state.activation.iter().all(|t| t.is_nan()));
    // With the stimulus the first steps need iterations, and still one build.
    let builds = Cell::new(0);
    let mut sim = Simulation::new(&backend, small_sheet(), &mut |b, a| {
        builds.set(builds.get() + 1);
        block_jacobi(b, a)
    })
    .unwrap();
    let mut seen = Vec::new();
    sim.run(5, &mut |s| seen.push(s.iterations)).unwrap();
    assert_eq!(builds.get(), 1);
    assert!(seen.iter().all(|&i| i > 0), "{seen:?}");
    assert_eq!(sim.setup().preconditioner, "block2");
    assert_eq!(sim.setup().unknowns, 2 * 17 * 17);
}

#[test]
fn a_slab_conducts_too() {
    let backend = CpuBackend::new();
    let mut config = BidomainConfig::new(Tissue::slab(12).unwrap());
    config.dt = 0.1;
    config.solver.rtol = 1e-6;
    let mut sim = Simulation::new(&backend, config, &mut |b, a| block_jacobi(b, a)).unwrap();
    sim.run(60, &mut |_| {}).unwrap();
    let act = sim.state().unwrap().activation;
    // Along the bottom edge, activation times increase away from the corner on
    // every layer, and the layers agree (the stimulus spans the thickness).
    let (g, layer) = (13, 13 * 13);
    for z in 0..4 {
        let row = &act[z * layer..z * layer + 10];
        assert!(row.iter().all(|t| !t.is_nan()), "layer {z}: {row:?}");
        assert!(row.windows(2).all(|w| w[0] <= w[1]), "layer {z}: {row:?}");
        assert!((row[9] - act[9]).abs() < 0.05);
    }
    assert!(act[g - 1].is_nan() || act[g - 1] > act[9]);
}

#[test]
fn bad_configurations_are_errors() {
    let backend = CpuBackend::new();
    let mut c = small_sheet();
    c.dt = 0.0;
    assert!(Simulation::new(&backend, c, &mut |b, a| block_jacobi(b, a)).is_err());
    let mut c = small_sheet();
    c.threshold = f64::NAN;
    assert!(Simulation::new(&backend, c, &mut |b, a| block_jacobi(b, a)).is_err());
    let mut c = small_sheet();
    c.solver.rtol = -1.0;
    assert!(Simulation::new(&backend, c, &mut |b, a| block_jacobi(b, a)).is_err());
    // A builder's error is passed on.
    let c = small_sheet();
    let failing = Simulation::new(&backend, c, &mut |_, _| {
        Err(gpuq_core::Error::InvalidArgument(
            "no preconditioner".into(),
        ))
    });
    assert!(failing.is_err());
}

#[test]
fn amg_needs_far_fewer_iterations_than_block_jacobi_for_the_same_answer() {
    let backend = CpuBackend::new();
    let mut config = small_sheet();
    config.solver.rtol = 1e-8;
    let mut with_amg = Simulation::new(&backend, config.clone(), &mut |b, a| {
        amg(b, a, &amg_options(), Layout::Csr)
    })
    .unwrap();
    let mut with_jacobi =
        Simulation::new(&backend, config, &mut |b, a| block_jacobi(b, a)).unwrap();
    let ra = with_amg.run(12, &mut |_| {}).unwrap();
    let rj = with_jacobi.run(12, &mut |_| {}).unwrap();
    assert_eq!(ra.setup.preconditioner, "amg");
    assert!(
        3 * ra.total_iterations < rj.total_iterations,
        "amg {} vs block2 {}",
        ra.total_iterations,
        rj.total_iterations
    );
    let (sa, sj) = (with_amg.state().unwrap(), with_jacobi.state().unwrap());
    for (x, y) in sa.vm.iter().zip(&sj.vm) {
        assert!((x - y).abs() < 1e-4, "{x} vs {y}");
    }
    for (x, y) in sa.phi_e.iter().zip(&sj.phi_e) {
        assert!((x - y).abs() < 1e-4, "{x} vs {y}");
    }
}
