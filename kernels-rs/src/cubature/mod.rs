//! Adaptive cubature and tensor Gauss rules, per item: elementary functions that
//! give the same bits on both backends ([`math`]), the built-in integrands
//! ([`integrand`]), one rule application to a box and the per-thread bounded
//! CUHRE ([`rule`]), the same application dealt to the lanes of a warp
//! ([`lanes`]), and tensor-rule points and chunk sums ([`tensor`]).

pub mod functions;
pub mod integrand;
pub mod lanes;
pub mod math;
pub mod rule;
pub mod tensor;
