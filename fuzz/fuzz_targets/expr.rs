//! Arbitrary bytes into the expression parser: the first byte picks the
//! dimension (1..=8), the rest is the text. An expression that parses is
//! evaluated both ways at (0.5, ..., 0.5) and translated to CUDA C; nothing
//! may panic (NaN results are fine).

#![no_main]

use gpuq_expr::Expr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let dim = 1 + usize::from(first % 8);
    let text = String::from_utf8_lossy(rest);
    if let Ok(expr) = Expr::parse(&text, dim) {
        let x = vec![0.5; dim];
        let _ = expr.eval(&x);
        let _ = expr.eval_reference(&x);
        let _ = expr.cuda_source();
    }
});
