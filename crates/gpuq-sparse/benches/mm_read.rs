//! Reading a Matrix Market file, phase by phase: `mm_read vector FILE` or
//! `mm_read matrix FILE` prints the seconds to read the bytes, to check them
//! as UTF-8, to parse them (a dense vector; or triplets) and, for a matrix, to
//! convert the triplets to CSR, then the total, on one line. Run by
//! `benches/mm_read.sh` on the GPU machine's host next to SciPy's `mmread` and
//! `fast_matrix_market` on the same files (docs/benchmarks.md). Any other
//! arguments (cargo bench passes `--bench`) are ignored.

use gpuq_sparse::{matrix_market as mm, Coo, Csr};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().filter(|a| !a.starts_with("--")).collect();
    let (Some(kind), Some(path)) = (args.get(1), args.get(2)) else {
        println!("mm_read: usage: mm_read vector|matrix FILE (nothing to do)");
        return;
    };
    let t = Instant::now();
    let bytes = std::fs::read(path).expect("readable file");
    let read = t.elapsed().as_secs_f64();
    let text = String::from_utf8(bytes).expect("UTF-8 text");
    let utf8 = t.elapsed().as_secs_f64() - read;
    if kind == "vector" {
        let v: Vec<f64> = mm::parse_dense_vector(&text).expect("a vector");
        let parse = t.elapsed().as_secs_f64() - read - utf8;
        println!(
            "mm_read vector n {} read {read:.3} utf8 {utf8:.3} parse {parse:.3} total {:.3}",
            v.len(),
            t.elapsed().as_secs_f64()
        );
    } else {
        let coo: Coo<f64> = mm::parse_coo(&text).expect("a matrix");
        let parse = t.elapsed().as_secs_f64() - read - utf8;
        let a = Csr::from_coo(&coo).expect("a valid matrix");
        let csr = t.elapsed().as_secs_f64() - read - utf8 - parse;
        println!(
            "mm_read matrix n {} nnz {} read {read:.3} utf8 {utf8:.3} parse {parse:.3} csr {csr:.3} total {:.3}",
            a.nrows(),
            a.nnz(),
            t.elapsed().as_secs_f64()
        );
    }
}
