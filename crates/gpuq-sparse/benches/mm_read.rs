//! Reading a Matrix Market file: `mm_read vector FILE` or `mm_read matrix
//! FILE` prints the seconds of the library's reader (`read_dense_vector`,
//! `read_csr`: the file read piece by piece by the threads that parse the
//! pieces, and for a matrix the CSR arrays built), then, on the text already
//! in memory, the seconds to parse it (`parse_dense_vector`, or for a matrix
//! `parse_coo` to triplets), and for a matrix the seconds to convert those
//! triplets to CSR (`Csr::from_coo`) and to parse the text straight to CSR
//! (`parse_csr`), on one line. Run by `benches/mm_read.sh` on the GPU
//! machine's host next to SciPy's `mmread` and `fast_matrix_market` on the
//! same files (docs/benchmarks.md). Arguments starting with `--` (cargo
//! bench passes `--bench`) are ignored.

use gpuq_sparse::{matrix_market as mm, Coo, Csr};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| !a.starts_with("--")).collect();
    let (Some(kind), Some(path)) = (args.get(1), args.get(2)) else {
        println!("mm_read: usage: mm_read vector|matrix FILE (nothing to do)");
        return;
    };
    let text = std::fs::read_to_string(path).expect("a readable text file");
    let t = Instant::now();
    if kind == "vector" {
        let v: Vec<f64> = mm::read_dense_vector(path).expect("a vector");
        let total = t.elapsed().as_secs_f64();
        let t = Instant::now();
        mm::parse_dense_vector::<f64>(&text).expect("a vector");
        let parse = t.elapsed().as_secs_f64();
        println!(
            "mm_read vector n {} total {total:.3} (parse {parse:.3})",
            v.len()
        );
    } else {
        let a: Csr<f64> = mm::read_csr(path).expect("a matrix");
        let total = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let coo: Coo<f64> = mm::parse_coo(&text).expect("a matrix");
        let parse = t.elapsed().as_secs_f64();
        let t = Instant::now();
        Csr::from_coo(&coo).expect("a valid matrix");
        let csr = t.elapsed().as_secs_f64();
        drop(coo);
        let t = Instant::now();
        mm::parse_csr::<f64>(&text).expect("a matrix");
        let direct = t.elapsed().as_secs_f64();
        println!(
            "mm_read matrix n {} nnz {} total {total:.3} (parse {parse:.3} csr {csr:.3} text-to-csr {direct:.3})",
            a.nrows(),
            a.nnz()
        );
    }
}
