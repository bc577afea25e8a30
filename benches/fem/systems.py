#!/usr/bin/env python3
"""Finite-element test systems for the AMG benchmarks (issue 47).

Assembles seven SPD systems with scikit-fem on unstructured (randomly jittered)
simplex meshes, eliminates the Dirichlet unknowns (one system keeps them as
identity rows, as many finite-element codes do), and writes Matrix Market
files that both the Rust benches and `peers.py` read:

    DIR/NAME/A.mtx   the matrix, `coordinate real symmetric` (lower triangle)
    DIR/NAME/b.mtx   the load vector, `array` n x 1
    DIR/NAME/X.mtx   coordinates, `array`: one row per node (vector problems)
                     or per unknown (scalar problems), in the matrix's order
    DIR/NAME/B.mtx   elasticity only: rigid body modes on the kept unknowns,
                     `array` n x 6 (3D: tx ty tz rx ry rz) or n x 3 (2D: tx ty r)
    DIR/manifest.json  n, nnz (both triangles), block size and files per system

Vector problems are numbered node by node (ux uy uz of node 0, then node 1, ...),
so block size 3 (2 in 2D) rows of A belong to one node.

    python systems.py --out DIR --scale S [--only NAME]

Scale 0 gives about 1e4 unknowns per system, 1 about 2e5, 2 about 1e6
(`poisson_p1_ball` refines a ball uniformly, so it moves in steps of 8x).
"""
import argparse
import json
import os
import time

import numpy as np
import scipy
import scipy.io
import scipy.sparse
import skfem
from skfem import (Basis, BilinearForm, ElementTetP1, ElementTetP2,
                   ElementTriP1, ElementVector, LinearForm, MeshTet, MeshTri)
from skfem.helpers import dot, grad
from skfem.models.elasticity import lame_parameters, linear_elasticity

TARGET = {0: 1e4, 1: 2e5, 2: 1e6}  # approximate unknowns per scale
SEED = 47


# ---------------------------------------------------------------- meshes
def signed_volumes(p, t):
    """d! times the signed volume of each simplex (columns of t)."""
    edges = np.stack([p[:, t[i]] - p[:, t[0]] for i in range(1, t.shape[0])])
    return np.linalg.det(edges.transpose(2, 1, 0))  # (nel, d, d)


def jitter(mesh, frac=0.15, seed=SEED):
    """Moves each interior node randomly by up to `frac` of its shortest edge in
    each coordinate (fixed seed), so the mesh is no longer a lattice. Halves the
    move until no element is inverted. Moves the nodes in place: the topology,
    which skfem caches (facets: slow on big meshes), stays valid."""
    p, t = mesh.p, mesh.t
    h = np.full(p.shape[1], np.inf)
    for i in range(t.shape[0]):
        for j in range(i + 1, t.shape[0]):
            length = np.linalg.norm(p[:, t[i]] - p[:, t[j]], axis=0)
            np.minimum.at(h, t[i], length)
            np.minimum.at(h, t[j], length)
    move = np.random.default_rng(seed).uniform(-1, 1, p.shape) * h
    move[:, mesh.boundary_nodes()] = 0.0
    sign = np.sign(signed_volumes(p, t))
    while frac > 1e-3:
        q = p + frac * move
        if np.all(np.sign(signed_volumes(q, t)) == sign):
            assert not hasattr(mesh, "_cached_mapping")  # no geometry cached yet
            mesh.doflocs[:] = q
            return mesh
        frac /= 2
    raise RuntimeError("could not jitter the mesh without inverting elements")


def box_tet(cells, lengths):
    """Jittered tetrahedral mesh of [0,Lx]x[0,Ly]x[0,Lz] (6 tets per cell)."""
    axes = [np.linspace(0, L, c + 1) for c, L in zip(cells, lengths)]
    return jitter(MeshTet.init_tensor(*axes))


def box_tri(cells, lengths):
    """Jittered triangle mesh of [0,Lx]x[0,Ly] (2 triangles per cell)."""
    axes = [np.linspace(0, L, c + 1) for c, L in zip(cells, lengths)]
    return jitter(MeshTri.init_tensor(*axes))


# ---------------------------------------------------------------- forms
@BilinearForm
def laplace(u, v, w):
    return dot(grad(u), grad(v))


@BilinearForm
def weighted_laplace(u, v, w):
    return w.k * dot(grad(u), grad(v))


@LinearForm
def unit_load(v, w):
    return 1.0 * v


@LinearForm
def gravity(v, w):
    return -v[-1]  # body force (0, ..., 0, -1)


# ---------------------------------------------------------------- systems
def eliminate(A, b, fixed):
    """Dirichlet u = 0 on `fixed` by elimination: keeps the other unknowns in
    increasing order. Returns A_II, b_I, kept."""
    keep = np.setdiff1d(np.arange(A.shape[0]), fixed)
    return A[keep][:, keep], b[keep], keep


def identity_rows(A, b, fixed):
    """Dirichlet u = 0 on `fixed` kept in the matrix: their rows and columns
    zeroed, 1 on the diagonal, b = 0 there (A stays symmetric)."""
    free = np.ones(A.shape[0])
    free[fixed] = 0.0
    D = scipy.sparse.diags(free)
    A = (D @ A @ D + scipy.sparse.diags(1.0 - free)).tocsr()
    A.eliminate_zeros()
    return A, b * free


def scalar_system(mesh, element, form, keep_fixed=False, **kw):
    """A scalar problem with u = 0 on the whole boundary and load 1: the
    boundary unknowns eliminated, or with `keep_fixed` kept as identity rows."""
    basis = Basis(mesh, element)
    A = form.assemble(basis, **kw)
    b = unit_load.assemble(basis)
    fixed = basis.get_dofs().flatten()
    if keep_fixed:
        A, b = identity_rows(A, b, fixed)
        return dict(A=A, b=b, X=basis.doflocs.T, block_size=1)
    A, b, keep = eliminate(A, b, fixed)
    return dict(A=A, b=b, X=basis.doflocs[:, keep].T, block_size=1)


def elasticity(mesh, element, clamped_nodes):
    """Linear isotropic elasticity (E = 1, nu = 0.3; plane strain in 2D) under
    gravity, clamped on `clamped_nodes`. Unknowns node by node."""
    d = mesh.dim()
    basis = Basis(mesh, ElementVector(element))
    assert basis.N == d * mesh.p.shape[1]  # P1: every unknown sits on a node
    A = linear_elasticity(*lame_parameters(1.0, 0.3)).assemble(basis)
    b = gravity.assemble(basis)
    # basis.nodal_dofs[c, i] is the unknown of component c at node i; reading it
    # node by node gives the interleaved order whatever skfem's own order is.
    nodes = np.setdiff1d(np.arange(mesh.p.shape[1]), clamped_nodes)
    keep = basis.nodal_dofs[:, nodes].T.ravel()
    A, b = A[keep][:, keep], b[keep]
    X = mesh.p[:, nodes].T
    B = np.zeros((d * len(nodes), 3 if d == 2 else 6))
    for c in range(d):  # translations
        B[c::d, c] = 1.0
    if d == 2:  # rotation (-y, x)
        B[0::2, 2], B[1::2, 2] = -X[:, 1], X[:, 0]
    else:  # rotations about x (0,-z,y), y (z,0,-x), z (-y,x,0)
        x, y, z = X.T
        B[1::3, 3], B[2::3, 3] = -z, y
        B[0::3, 4], B[2::3, 4] = z, -x
        B[0::3, 5], B[1::3, 5] = -y, x
    return dict(A=A, b=b, X=X, B=B, block_size=d)


def elasticity3d(target):
    """Cantilever [0,2]x[0,1]x[0,1], P1 tets, clamped at x = 0."""
    n = max(2, round((target / 6) ** (1 / 3)))
    mesh = box_tet((2 * n, n, n), (2.0, 1.0, 1.0))
    return mesh, elasticity(mesh, ElementTetP1(), np.flatnonzero(mesh.p[0] == 0))


def elasticity2d(target):
    """Plane strain cantilever [0,2]x[0,1], P1 triangles, clamped at x = 0."""
    n = max(2, round((target / 4) ** 0.5))
    mesh = box_tri((2 * n, n), (2.0, 1.0))
    return mesh, elasticity(mesh, ElementTriP1(), np.flatnonzero(mesh.p[0] == 0))


def poisson_p1_ball(target):
    """-lap u = 1 on the unit ball (init_ball refined, jittered), P1."""
    refs = max(1, round(4 + np.log(target / 5000) / np.log(8)))
    mesh = jitter(MeshTet.init_ball(refs))
    return mesh, scalar_system(mesh, ElementTetP1(), laplace)


def poisson_p2_cube(target):
    """-lap u = 1 on the unit cube, P2 tets (about 8 unknowns per cell)."""
    n = max(2, round((target / 8) ** (1 / 3)))
    mesh = box_tet((n, n, n), (1.0, 1.0, 1.0))
    return mesh, scalar_system(mesh, ElementTetP2(), laplace)


def aniso2d(target, eps=1e-3, theta=np.pi / 6):
    """-div(K grad u) = 1 on the unit square, K = R diag(1, eps) R^T with R the
    rotation by 30 degrees, P1 triangles."""
    n = max(2, round(target ** 0.5))
    mesh = box_tri((n, n), (1.0, 1.0))
    c, s = np.cos(theta), np.sin(theta)
    K = np.array([[c * c + eps * s * s, (1 - eps) * c * s],
                  [(1 - eps) * c * s, s * s + eps * c * c]])

    @BilinearForm
    def form(u, v, w):
        return dot(np.einsum('ij,j...->i...', K, grad(u)), grad(v))  # K grad u . grad v

    return mesh, scalar_system(mesh, ElementTriP1(), form)


def jump3d(target, kappa=1e4, keep_fixed=False):
    """-div(k grad u) = 1 on the unit cube, k = kappa on the elements whose
    centroid lies in [1/4,3/4]^3 (a floating inclusion), else 1; P1 tets."""
    n = max(2, round(target ** (1 / 3)))
    mesh = box_tet((n, n, n), (1.0, 1.0, 1.0))
    centroid = mesh.p[:, mesh.t].mean(axis=1)
    inside = np.all(np.abs(centroid - 0.5) < 0.25, axis=0)
    nqp = Basis(mesh, ElementTetP1()).X.shape[1]
    k = np.repeat(np.where(inside, kappa, 1.0)[:, None], nqp, axis=1)
    return mesh, scalar_system(mesh, ElementTetP1(), weighted_laplace, keep_fixed, k=k)


def jump3d_identity_rows(target):
    """jump3d with its boundary unknowns kept in the matrix as identity rows
    (rows and columns zeroed, 1 on the diagonal)."""
    return jump3d(target, keep_fixed=True)


SYSTEMS = {f.__name__: f for f in
           (elasticity3d, elasticity2d, poisson_p1_ball, poisson_p2_cube,
            aniso2d, jump3d, jump3d_identity_rows)}


# ---------------------------------------------------------------- output
def write(folder, sys):
    """Writes the files of one system; returns their names relative to the
    output folder."""
    os.makedirs(folder, exist_ok=True)
    A = sys["A"].tocsr()
    A = ((A + A.T) * 0.5).tocsr()  # exact symmetry: the file keeps one triangle
    files = {}
    for key in ("A", "b", "X", "B"):
        if key not in sys:
            continue
        path = os.path.join(folder, key + ".mtx")
        if key == "A":
            scipy.io.mmwrite(path, A, symmetry="symmetric")
        else:
            scipy.io.mmwrite(path, np.asarray(sys[key]).reshape(len(sys[key]), -1))
        files[key] = os.path.join(os.path.basename(folder), key + ".mtx")
    return A, files


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--scale", type=int, default=0, choices=sorted(TARGET))
    ap.add_argument("--only", choices=sorted(SYSTEMS), help="one system only")
    ap.add_argument("--keep", action="store_true",
                    help="keep the systems of the folder's manifest at this scale; make the rest")
    args = ap.parse_args()

    os.makedirs(args.out, exist_ok=True)
    manifest_path = os.path.join(args.out, "manifest.json")
    manifest = {"systems": {}}
    if (args.only or args.keep) and os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
    manifest["versions"] = {"scikit-fem": skfem.__version__,
                            "numpy": np.__version__, "scipy": scipy.__version__}

    names = [args.only] if args.only else list(SYSTEMS)
    if args.keep:
        have = manifest["systems"]
        names = [n for n in names if have.get(n, {}).get("scale") != args.scale]
    print(f"{'system':16} {'n':>9} {'nnz':>11} {'bs':>3} {'assemble s':>11} {'write s':>8}")
    for name in names:
        t0 = time.perf_counter()
        mesh, sys = SYSTEMS[name](TARGET[args.scale])
        t1 = time.perf_counter()
        A, files = write(os.path.join(args.out, name), sys)
        t2 = time.perf_counter()
        manifest["systems"][name] = dict(
            n=A.shape[0], nnz=A.nnz, block_size=sys["block_size"], files=files,
            scale=args.scale, nodes=mesh.p.shape[1], elements=mesh.t.shape[1],
            assemble_s=round(t1 - t0, 3), description=SYSTEMS[name].__doc__.strip())
        print(f"{name:16} {A.shape[0]:9d} {A.nnz:11d} {sys['block_size']:3d} "
              f"{t1 - t0:11.2f} {t2 - t1:8.2f}", flush=True)
    with open(manifest_path, "w") as f:
        json.dump(manifest, f, indent=1)


if __name__ == "__main__":
    main()
