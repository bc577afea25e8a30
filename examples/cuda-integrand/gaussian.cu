// A user integrand in CUDA C for `gpuq integrate --cuda-source`:
// f(x) = exp(-|x|^2) over the unit box, whose integral in n dimensions is
// (sqrt(pi) / 2 * erf(1))^n (0.74682413^n; 0.23229 for n = 5).
extern "C" __device__ double gpuq_integrand(const double *x, unsigned int n)
{
    double s = 0.0;
    for (unsigned int i = 0; i < n; ++i) {
        s += x[i] * x[i];
    }
    return exp(-s);
}
