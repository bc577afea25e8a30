//! Construction of the rules (host side, once per dimension).
//!
//! * [`RuleKind::Cuhre`]: the Berntsen-Espelid-Genz rules of DCUHRE (ACM TOMS
//!   17(4), 1991, algorithm 698): degree 13 for n = 2 (14 generators, 65
//!   points, tabulated constants of S. Eriksen), degree 11 for n = 3 (13
//!   generators, 127 points, Berntsen-Espelid 1988), degree 9 for n >= 4 (the
//!   Genz-Malik 1983 construction: generator parameters and weights are
//!   closed-form functions of n, 2^n + 4 n^3 / 3 + O(n^2) points), each with four
//!   null rules (two of degree d - 2, one of d - 4, one of d - 6) for the error
//!   estimate.
//! * [`RuleKind::Degree9`]: the degree-9 rule for any n >= 2.
//! * [`RuleKind::GenzMalik7`]: the degree-7 rule of Genz and Malik (J. Comput.
//!   Appl. Math. 6, 1980) with its embedded degree-5 rule; error |I7 - I5|;
//!   2^n + 2 n^2 + 2 n + 1 points.
//!
//! The constants are facts from those publications; the code is ours. Weights
//! are for [-1, 1]^n (the basic rule sums to 2^n); a box of half-widths h scales
//! them by prod h.

// The tables and references are kept digit for digit as published.
#![allow(clippy::excessive_precision)]
use crate::kernels::Boxes;
use gpuq_core::{Error, Result};
use gpuq_kernels::cubature::integrand::Integrand;
use gpuq_kernels::cubature::integrand::MAX_DIM;
use gpuq_kernels::cubature::lanes::{evaluate_lanes, table_points, RulePoint};
use gpuq_kernels::cubature::rule::BoxResult;
use gpuq_kernels::cubature::rule::{Rule, ERROR_EMBEDDED, ERROR_NULL_RULES, MAX_GENERATORS};

/// Which rule family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum RuleKind {
    /// DCUHRE's choice by dimension: degree 13 (n = 2), 11 (n = 3), 9 (n >= 4).
    Cuhre,
    /// DCUHRE's degree-9 rule for every n >= 2.
    Degree9,
    /// Genz-Malik degree 7 with the embedded degree-5 rule.
    GenzMalik7,
}

impl RuleKind {
    /// The names [`RuleKind::parse`] accepts.
    pub const NAMES: &'static [&'static str] = &["cuhre", "degree9", "genz-malik"];

    /// Parses `cuhre`, `degree9` or `genz-malik`. O(1).
    pub fn parse(name: &str) -> gpuq_core::Result<Self> {
        match name {
            "cuhre" => Ok(RuleKind::Cuhre),
            "degree9" => Ok(RuleKind::Degree9),
            "genz-malik" => Ok(RuleKind::GenzMalik7),
            other => Err(gpuq_core::Error::InvalidArgument(format!(
                "unknown rule '{other}' (available: {})",
                Self::NAMES.join(", ")
            ))),
        }
    }
}

/// Smallest dimension the rules support.
pub const MIN_DIM: usize = 2;

/// Builds the rule of `kind` for dimension `n` (2..=16). Cost: O(n) flops plus
/// counting the points of each generator.
pub fn build(kind: RuleKind, n: usize) -> Result<Rule> {
    if !(MIN_DIM..=MAX_DIM).contains(&n) {
        return Err(Error::InvalidArgument(format!(
            "cubature rules need a dimension from {MIN_DIM} to {MAX_DIM}, not {n}"
        )));
    }
    let mut r = empty(n);
    match (kind, n) {
        (RuleKind::Cuhre, 2) => degree13(&mut r),
        (RuleKind::Cuhre, 3) => degree11(&mut r),
        (RuleKind::Cuhre, _) | (RuleKind::Degree9, _) => degree9(&mut r),
        (RuleKind::GenzMalik7, _) => genz_malik(&mut r),
    }
    r.points = (0..r.generators as usize)
        .map(|j| generator_points(&r.g[j][..n]))
        .sum::<u64>() as u32;
    if r.error_kind == ERROR_NULL_RULES {
        scales_and_norms(&mut r);
    }
    Ok(r)
}

/// A rule with the table of its points past the single-axis generators, in
/// the order lanes take them ([`gpuq_kernels::cubature::lanes`]): what the
/// batch evaluations of the parallel algorithms apply.
#[derive(Clone, Debug, PartialEq)]
pub struct LaneRule {
    /// The rule.
    pub rule: Rule,
    /// Its points other than the centre and the single-axis ones.
    pub table: Vec<RulePoint>,
}

impl LaneRule {
    /// Applies the rule to box `b` of `boxes` with its points dealt to lanes
    /// as a warp of the device deals them (`evaluate_lanes`: the same bits
    /// on every backend). Cost: `rule.points` evaluations of f.
    pub fn apply<F: Integrand + ?Sized>(&self, f: &F, boxes: &Boxes, b: usize) -> BoxResult {
        evaluate_lanes(
            &self.rule,
            &self.table,
            f,
            boxes.center_of(b),
            boxes.half_of(b),
        )
    }
}

/// Builds the rule of `kind` for dimension `n` with its point table. Cost:
/// [`build`] plus O(points n) (16 bytes per point: 2^16 + O(n^3) points at
/// n = 16).
pub fn build_lanes(kind: RuleKind, n: usize) -> Result<LaneRule> {
    let rule = build(kind, n)?;
    let mut table = Vec::with_capacity(rule.points as usize);
    if !table_points(&rule, |p| table.push(p)) {
        return Err(Error::InvalidArgument(format!(
            "the {kind:?} rule of dimension {n} has no point table"
        )));
    }
    Ok(LaneRule { rule, table })
}

fn empty(n: usize) -> Rule {
    Rule {
        dim: n as u32,
        generators: 0,
        error_kind: ERROR_NULL_RULES,
        degree: 0,
        points: 0,
        pad: 0,
        g: [[0.0; MAX_DIM]; MAX_GENERATORS],
        w: [[0.0; MAX_GENERATORS]; 5],
        scales: [[0.0; MAX_GENERATORS]; 3],
        norms: [[0.0; MAX_GENERATORS]; 3],
        errcof: [0.0; 6],
    }
}

/// Points a fully symmetric generator produces: distinct permutations times
/// sign changes of its nonzero coordinates.
pub fn generator_points(g: &[f64]) -> u64 {
    let n = g.len();
    let nonzero = g.iter().filter(|v| **v != 0.0).count();
    // Multinomial n! / prod(multiplicity!) over the distinct values.
    let mut sorted = g.to_vec();
    sorted.sort_by(|a, b| b.total_cmp(a));
    let mut perms: u64 = 1;
    let mut placed = 0u64;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j < n && sorted[j] == sorted[i] {
            j += 1;
        }
        // Choose positions for this group among the remaining ones.
        let k = (j - i) as u64;
        perms *= binomial(n as u64 - placed, k);
        placed += k;
        i = j;
    }
    perms << nonzero
}

fn binomial(n: u64, k: u64) -> u64 {
    (0..k).fold(1u64, |acc, i| acc * (n - i) / (i + 1))
}

/// DINHRE: scale factors and norms that combine successive null rules.
fn scales_and_norms(r: &mut Rule) {
    let n = r.dim as usize;
    let m = r.generators as usize;
    let pts: Vec<f64> = (0..m)
        .map(|j| generator_points(&r.g[j][..n]) as f64)
        .collect();
    let twon = (1u64 << n) as f64;
    for k in 0..3 {
        for i in 0..m {
            let s = if r.w[k + 1][i] != 0.0 {
                -r.w[k + 2][i] / r.w[k + 1][i]
            } else {
                100.0
            };
            r.scales[k][i] = s;
            let norm: f64 = (0..m)
                .map(|j| pts[j] * (r.w[k + 2][j] + s * r.w[k + 1][j]).abs())
                .sum();
            r.norms[k][i] = twon / norm;
        }
    }
}

/// Sets generator `j` (0-based) to the given leading coordinates.
fn set_gen(r: &mut Rule, j: usize, lead: &[f64]) {
    r.g[j] = [0.0; MAX_DIM];
    r.g[j][..lead.len()].copy_from_slice(lead);
    // The symmetric sums enumerate permutations from the non-increasing order.
    r.g[j][..lead.len()].sort_by(|a, b| b.total_cmp(a));
}

/// D132RE: degree 13 for n = 2 (S. Eriksen's rule), tabulated.
fn degree13(r: &mut Rule) {
    const G: [f64; 16] = [
        0.2517129343453109,
        0.7013933644534266,
        0.9590960631619962,
        0.9956010478552127,
        0.5000000000000000,
        0.1594544658297559,
        0.3808991135940188,
        0.6582769255267192,
        0.8761473165029315,
        0.9982431840531980,
        0.9790222658168462,
        0.6492284325645389,
        0.8727421201131239,
        0.3582614645881228,
        0.5666666666666666,
        0.2077777777777778,
    ];
    const W: [[f64; 14]; 5] = [
        [
            0.3379692360134460e-01,
            0.9508589607597761e-01,
            0.1176006468056962e+00,
            0.2657774586326950e-01,
            0.1701441770200640e-01,
            0.0000000000000000e+00,
            0.1626593098637410e-01,
            0.1344892658526199e+00,
            0.1328032165460149e+00,
            0.5637474769991870e-01,
            0.3908279081310500e-02,
            0.3012798777432150e-01,
            0.1030873234689166e+00,
            0.6250000000000000e-01,
        ],
        [
            0.3213775489050763e+00,
            -0.1767341636743844e+00,
            0.7347600537466072e-01,
            -0.3638022004364754e-01,
            0.2125297922098712e-01,
            0.1460984204026913e+00,
            0.1747613286152099e-01,
            0.1444954045641582e+00,
            0.1307687976001325e-03,
            0.5380992313941161e-03,
            0.1042259576889814e-03,
            -0.1401152865045733e-02,
            0.8041788181514763e-02,
            -0.1420416552759383e+00,
        ],
        [
            0.3372900883288987e+00,
            -0.1644903060344491e+00,
            0.7707849911634622e-01,
            -0.3804478358506310e-01,
            0.2223559940380806e-01,
            0.1480693879765931e+00,
            0.4467143702185814e-05,
            0.1508944767074130e+00,
            0.3647200107516215e-04,
            0.5777198999013880e-03,
            0.1041757313688177e-03,
            -0.1452822267047819e-02,
            0.8338339968783705e-02,
            -0.1472796329231960e+00,
        ],
        [
            -0.8264123822525677e+00,
            0.3065838614094360e+00,
            0.2389292538329435e-02,
            -0.1343024157997222e+00,
            0.8833366840533900e-01,
            0.0000000000000000e+00,
            0.9786283074168292e-03,
            -0.1319227889147519e+00,
            0.7990012200150630e-02,
            0.3391747079760626e-02,
            0.2294915718283264e-02,
            -0.1358584986119197e-01,
            0.4025866859057809e-01,
            0.3760268580063992e-02,
        ],
        [
            0.6539094339575232e+00,
            -0.2041614154424632e+00,
            -0.1746981515794990e+00,
            0.3937939671417803e-01,
            0.6974520545933992e-02,
            0.0000000000000000e+00,
            0.6667702171778258e-02,
            0.5512960621544304e-01,
            0.5443846381278607e-01,
            0.2310903863953934e-01,
            0.1506937747477189e-01,
            -0.6057021648901890e-01,
            0.4225737654686337e-01,
            0.2561989142123099e-01,
        ],
    ];
    r.degree = 13;
    r.generators = 14;
    for (j, lead) in [
        &[][..],
        &[G[0]],
        &[G[1]],
        &[G[2]],
        &[G[3]],
        &[G[4]],
        &[G[5], G[5]],
        &[G[6], G[6]],
        &[G[7], G[7]],
        &[G[8], G[8]],
        &[G[9], G[9]],
        &[G[10], G[11]],
        &[G[12], G[13]],
        &[G[14], G[15]],
    ]
    .iter()
    .enumerate()
    {
        set_gen(r, j, lead);
    }
    r.w = [[0.0; MAX_GENERATORS]; 5];
    for (k, row) in W.iter().enumerate() {
        r.w[k][..14].copy_from_slice(row);
    }
    r.errcof = [10.0, 10.0, 1.0, 5.0, 0.5, 0.25];
}

/// D113RE: degree 11 for n = 3 (Berntsen and Espelid), tabulated.
fn degree11(r: &mut Rule) {
    const G: [f64; 14] = [
        0.1900000000000000,
        0.5000000000000000,
        0.7500000000000000,
        0.8000000000000000,
        0.9949999999999999,
        0.9987344998351400,
        0.7793703685672423,
        0.9999698993088767,
        0.7902637224771788,
        0.4403396687650737,
        0.4378478459006862,
        0.9549373822794593,
        0.9661093133630748,
        0.4577105877763134,
    ];
    const W: [[f64; 13]; 5] = [
        [
            0.7923078151105734e-02,
            0.6797177392788080e-01,
            0.1086986538805825e-02,
            0.1838633662212829e+00,
            0.3362119777829031e-01,
            0.1013751123334062e-01,
            0.1687648683985235e-02,
            0.1346468564512807e+00,
            0.1750145884600386e-02,
            0.7752336383837454e-01,
            0.2461864902770251e+00,
            0.6797944868483039e-01,
            0.1419962823300713e-01,
        ],
        [
            0.1715006248224684e+01,
            -0.3755893815889209e+00,
            0.1488632145140549e+00,
            -0.2497046640620823e+00,
            0.1792501419135204e+00,
            0.3446126758973890e-02,
            -0.5140483185555825e-02,
            0.6536017839876425e-02,
            -0.6513454939229700e-03,
            -0.6304672433547204e-02,
            0.1266959399788263e-01,
            -0.5454241018647931e-02,
            0.4826995274768427e-02,
        ],
        [
            0.1936014978949526e+01,
            -0.3673449403754268e+00,
            0.2929778657898176e-01,
            -0.1151883520260315e+00,
            0.5086658220872218e-01,
            0.4453911087786469e-01,
            -0.2287828257125900e-01,
            0.2908926216345833e-01,
            -0.2898884350669207e-02,
            -0.2805963413307495e-01,
            0.5638741361145884e-01,
            -0.2427469611942451e-01,
            0.2148307034182882e-01,
        ],
        [
            0.5170828195605760e+00,
            0.1445269144914044e-01,
            -0.3601489663995932e+00,
            0.3628307003418485e+00,
            0.7148802650872729e-02,
            -0.9222852896022966e-01,
            0.1719339732471725e-01,
            -0.1021416537460350e+00,
            -0.7504397861080493e-02,
            0.1648362537726711e-01,
            0.5234610158469334e-01,
            0.1445432331613066e-01,
            0.3019236275367777e-02,
        ],
        [
            0.2054404503818520e+01,
            0.1377759988490120e-01,
            -0.5768062917904410e+00,
            0.3726835047700328e-01,
            0.6814878939777219e-02,
            0.5723169733851849e-01,
            -0.4493018743811285e-01,
            0.2729236573866348e-01,
            0.3547473950556990e-03,
            0.1571366799739551e-01,
            0.4990099219278567e-01,
            0.1377915552666770e-01,
            0.2878206423099872e-02,
        ],
    ];
    r.degree = 11;
    r.generators = 13;
    for (j, lead) in [
        &[][..],
        &[G[0]],
        &[G[1]],
        &[G[2]],
        &[G[3]],
        &[G[4]],
        &[G[5], G[5]],
        &[G[6], G[6]],
        &[G[7], G[7], G[7]],
        &[G[8], G[8], G[8]],
        &[G[9], G[9], G[9]],
        &[G[11], G[10], G[10]],
        &[G[12], G[12], G[13]],
    ]
    .iter()
    .enumerate()
    {
        set_gen(r, j, lead);
    }
    r.w = [[0.0; MAX_GENERATORS]; 5];
    for (k, row) in W.iter().enumerate() {
        r.w[k][..13].copy_from_slice(row);
    }
    r.errcof = [4.0, 4.0, 0.5, 3.0, 0.5, 0.25];
}

/// D09HRE: the degree-9 rule and its null rules as closed-form functions of n.
fn degree9(r: &mut Rule) {
    let n = r.dim as usize;
    let nf = n as f64;
    let wtleng = if n == 2 { 8 } else { 9 };
    let twon = (1u64 << n) as f64;
    // 1-based as in the publication: w[rule][generator].
    let mut w = [[0.0f64; 10]; 6];
    let full = wtleng;
    let lam0: f64 = 0.4707;
    let lam1 = 4.0 / (15.0 - 5.0 / lam0);
    let mut ratio = (1.0 - lam1 / lam0) / 27.0;
    let lam2 = (5.0 - 7.0 * lam1 - 35.0 * ratio) / (7.0 - 35.0 * lam1 / 3.0 - 35.0 * ratio / lam0);
    ratio = ratio * (1.0 - lam2 / lam0) / 3.0;
    let lam3 = (7.0 - 9.0 * (lam2 + lam1) + 63.0 * lam2 * lam1 / 5.0 - 63.0 * ratio)
        / (9.0 - 63.0 * (lam2 + lam1) / 5.0 + 21.0 * lam2 * lam1 - 63.0 * ratio / lam0);
    let lamp: f64 = 0.0625;
    let big = n > 2;

    // Degree-9 weights.
    w[1][full] = 1.0 / (3.0 * lam0).powi(4) / twon;
    if big {
        w[1][8] = (1.0 - 1.0 / (3.0 * lam0)) / (6.0 * lam1).powi(3);
    }
    w[1][7] = (1.0 - 7.0 * (lam0 + lam1) / 5.0 + 7.0 * lam0 * lam1 / 3.0)
        / (84.0 * lam1 * lam2 * (lam2 - lam0) * (lam2 - lam1));
    w[1][6] = (1.0 - 7.0 * (lam0 + lam2) / 5.0 + 7.0 * lam0 * lam2 / 3.0)
        / (84.0 * lam1 * lam1 * (lam1 - lam0) * (lam1 - lam2))
        - w[1][7] * lam2 / lam1
        - 2.0 * (nf - 2.0) * if big { w[1][8] } else { 0.0 };
    let cubic = |a: f64, b: f64, c: f64, d: f64| {
        (1.0 - 9.0 * ((a + b + c) / 7.0 - (a * b + a * c + b * c) / 5.0) - 3.0 * a * b * c)
            / (18.0 * d * (d - a) * (d - b) * (d - c))
    };
    w[1][4] = cubic(lam0, lam1, lam2, lam3);
    w[1][3] = cubic(lam0, lam1, lam3, lam2) - 2.0 * (nf - 1.0) * w[1][7];
    w[1][2] = cubic(lam0, lam2, lam3, lam1)
        - 2.0 * (nf - 1.0) * (w[1][7] + w[1][6] + (nf - 2.0) * if big { w[1][8] } else { 0.0 });

    // Two degree-7, one degree-5 and one degree-3 rule (made null rules below).
    let quad = |c: f64, wf: f64, a: f64, b: f64, d: f64| {
        (c - 7.0 * ((a + b) / 5.0 - a * b / 3.0 + twon * wf * lam0 * (lam0 - a) * (lam0 - b)))
            / (14.0 * d * (d - a) * (d - b))
    };
    for (row, full_w, axes) in [
        (
            2usize,
            1.0 / (108.0 * lam0.powi(4)) / twon,
            [lam3, lam2, lam1],
        ),
        (3, 5.0 / (324.0 * lam0.powi(4)) / twon, [lamp, lam2, lam1]),
        (4, 2.0 / (81.0 * lam0.powi(4)) / twon, [lam3, lam2, lam1]),
    ] {
        let c = if row == 4 { 2.0 } else { 1.0 };
        w[row][full] = full_w;
        if big {
            w[row][8] = (c - 27.0 * twon * w[row][9] * lam0.powi(3)) / (6.0 * lam1).powi(3);
        }
        w[row][7] = if row == 4 {
            (2.0 - 15.0 * lam1 / 9.0 - 15.0 * twon * w[row][full] * lam0 * (lam0 - lam1))
                / (60.0 * lam1 * lam2 * (lam2 - lam1))
        } else {
            (1.0 - 5.0 * lam1 / 3.0 - 15.0 * twon * w[row][full] * lam0 * lam0 * (lam0 - lam1))
                / (60.0 * lam1 * lam2 * (lam2 - lam1))
        };
        let w8 = if big { w[row][8] } else { 0.0 };
        w[row][6] = (1.0
            - 9.0 * (8.0 * lam1 * lam2 * w[row][7] + twon * w[row][full] * lam0 * lam0))
            / (36.0 * lam1 * lam1)
            - 2.0 * w8 * (nf - 2.0);
        // The largest axis generator: lam3 (generator 4) or lamp (generator 5).
        let [top, l2, l1] = axes;
        let top_index = if row == 3 { 5 } else { 4 };
        w[row][top_index] = quad(c, w[row][full], l1, l2, top);
        w[row][3] = quad(c, w[row][full], l1, top, l2) - 2.0 * (nf - 1.0) * w[row][7];
        w[row][2] = quad(c, w[row][full], l2, top, l1)
            - 2.0 * (nf - 1.0) * (w[row][7] + w[row][6] + (nf - 2.0) * w8);
    }
    w[5][2] = 1.0 / (6.0 * lam1);

    let (l0, l1, l2, l3, lp) = (
        lam0.sqrt(),
        lam1.sqrt(),
        lam2.sqrt(),
        lam3.sqrt(),
        lamp.sqrt(),
    );
    r.degree = 9;
    r.generators = wtleng as u32;
    set_gen(r, 0, &[]);
    set_gen(r, 1, &[l1]);
    set_gen(r, 2, &[l2]);
    set_gen(r, 3, &[l3]);
    set_gen(r, 4, &[lp]);
    set_gen(r, 5, &[l1, l1]);
    set_gen(r, 6, &[l1, l2]);
    if big {
        set_gen(r, 7, &[l1, l1, l1]);
    }
    set_gen(r, wtleng - 1, &vec![l0; n]);
    // The null rules are differences from the degree-9 rule; then scale the
    // basic rule to sum 2^n.
    let pts: Vec<f64> = (0..wtleng)
        .map(|j| generator_points(&r.g[j][..n]) as f64)
        .collect();
    w[1][1] = twon;
    for row in 2..=5 {
        for i in 2..=wtleng {
            w[row][i] -= w[1][i];
            w[row][1] -= pts[i - 1] * w[row][i];
        }
    }
    for i in 2..=wtleng {
        w[1][i] *= twon;
        w[1][1] -= pts[i - 1] * w[1][i];
    }
    r.w = [[0.0; MAX_GENERATORS]; 5];
    for row in 0..5 {
        for j in 0..wtleng {
            r.w[row][j] = w[row + 1][j + 1];
        }
    }
    r.errcof = [5.0, 5.0, 1.0, 5.0, 0.5, 0.25];
}

/// Genz-Malik degree 7 with the embedded degree-5 rule (stored as the difference
/// in null rule 1).
fn genz_malik(r: &mut Rule) {
    let n = r.dim as usize;
    let nf = n as f64;
    let twon = (1u64 << n) as f64;
    let l2 = (9.0f64 / 70.0).sqrt();
    let l3 = (9.0f64 / 10.0).sqrt();
    let l4 = (9.0f64 / 10.0).sqrt();
    let l5 = (9.0f64 / 19.0).sqrt();
    r.degree = 7;
    r.error_kind = ERROR_EMBEDDED;
    r.generators = 5;
    set_gen(r, 0, &[]);
    set_gen(r, 1, &[l2]);
    set_gen(r, 2, &[l3]);
    set_gen(r, 3, &[l4, l4]);
    set_gen(r, 4, &vec![l5; n]);
    // Weights of the unit-volume rules.
    let w7 = [
        (12824.0 - 9120.0 * nf + 400.0 * nf * nf) / 19683.0,
        980.0 / 6561.0,
        (1820.0 - 400.0 * nf) / 19683.0,
        200.0 / 19683.0,
        6859.0 / 19683.0 / twon,
    ];
    let w5 = [
        (729.0 - 950.0 * nf + 50.0 * nf * nf) / 729.0,
        245.0 / 486.0,
        (265.0 - 100.0 * nf) / 1458.0,
        25.0 / 729.0,
        0.0,
    ];
    r.w = [[0.0; MAX_GENERATORS]; 5];
    for j in 0..5 {
        r.w[0][j] = twon * w7[j];
        r.w[1][j] = twon * (w7[j] - w5[j]);
    }
}
