// tapegrad-cuda: reductions over rows. Callers move the reduced axes last and make the
// input contiguous, so every reduction is "one output per row". Type suffixes as in
// elementwise.cu. Launch with blockDim.x == TG_THREADS (256); one block per row
// (grid-stride over rows).
//
//   tg_<op>_rows_<t>(const T* x, T* out, long long rows, long long len, long long n)
//       op in sum, max, min: out[r] = op(x[r*len : min(r*len + len, n)]). A full
//       reduction of a long array runs twice: rows = ceil(n / len) partial results, then
//       one row over those. max/min propagate NaN (NumPy); a row must not be empty.
//   tg_mean_rows_<t>(const T* x, T* out, long long rows, long long len, long long n,
//                    long long divisor)       sum / divisor
//   tg_argmax_rows_<t>(const T* x, long long* out, long long rows, long long len)
//   tg_argmin_rows_<t>(...)   index of the first maximum (minimum) in each row; a NaN
//                             counts as the extreme (NumPy); len >= 1
#include "common.cuh"

template <typename T> struct TgLimits;
template <> struct TgLimits<float> {
    __device__ static float lowest() { return -__int_as_float(0x7f800000); }
    __device__ static float highest() { return __int_as_float(0x7f800000); }
};
template <> struct TgLimits<double> {
    __device__ static double lowest() { return -__longlong_as_double(0x7ff0000000000000LL); }
    __device__ static double highest() { return __longlong_as_double(0x7ff0000000000000LL); }
};
template <> struct TgLimits<long long> {
    __device__ static long long lowest() { return (long long)0x8000000000000000ULL; }
    __device__ static long long highest() { return 0x7fffffffffffffffLL; }
};

template <typename T> struct TgSum {
    __device__ static T identity() { return T(0); }
    __device__ static T combine(T a, T b) { return a + b; }
};
template <typename T> struct TgMax {
    __device__ static T identity() { return TgLimits<T>::lowest(); }
    __device__ static T combine(T a, T b) { return (a != a || a > b) ? a : b; }
};
template <typename T> struct TgMin {
    __device__ static T identity() { return TgLimits<T>::highest(); }
    __device__ static T combine(T a, T b) { return (a != a || a < b) ? a : b; }
};

// The reduction of `acc` over the block; valid in thread 0.
template <typename T, typename Op> __device__ T tg_block_reduce(T acc) {
    __shared__ T warp_vals[TG_THREADS / 32];
    for (int off = 16; off > 0; off >>= 1)
        acc = Op::combine(acc, __shfl_down_sync(0xffffffffu, acc, off));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_vals[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (int)(blockDim.x >> 5) ? warp_vals[lane] : Op::identity();
        for (int off = 16; off > 0; off >>= 1)
            acc = Op::combine(acc, __shfl_down_sync(0xffffffffu, acc, off));
    }
    __syncthreads();  // warp_vals is reused by the next row
    return acc;
}

template <typename T, typename Op>
__device__ void tg_reduce_rows(const T* __restrict__ x, T* __restrict__ out, long long rows,
                               long long len, long long n, long long divisor) {
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const long long start = r * len;
        const long long stop = start + len < n ? start + len : n;
        T acc = Op::identity();
        for (long long i = start + threadIdx.x; i < stop; i += blockDim.x)
            acc = Op::combine(acc, x[i]);
        acc = tg_block_reduce<T, Op>(acc);
        if (threadIdx.x == 0) out[r] = divisor > 0 ? acc / (T)divisor : acc;
    }
}

// (value, index) pairs: Better(a, b) says whether a wins; NaN wins, ties go to the lower index.
template <typename T, bool Max> __device__ __forceinline__ bool tg_arg_better(T a, long long ia,
                                                                             T b, long long ib) {
    if (ib < 0) return ia >= 0;
    if (ia < 0) return false;
    const bool an = a != a, bn = b != b;
    if (an || bn) return an && (!bn || ia < ib);
    if (a == b) return ia < ib;
    return Max ? a > b : a < b;
}

template <typename T, bool Max>
__device__ void tg_arg_rows(const T* __restrict__ x, long long* __restrict__ out, long long rows,
                            long long len) {
    __shared__ T vals[TG_THREADS];
    __shared__ long long idxs[TG_THREADS];
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* row = x + r * len;
        T best = T(0);
        long long bi = -1;
        for (long long j = threadIdx.x; j < len; j += blockDim.x)
            if (tg_arg_better<T, Max>(row[j], j, best, bi)) { best = row[j]; bi = j; }
        vals[threadIdx.x] = best;
        idxs[threadIdx.x] = bi;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if ((int)threadIdx.x < s &&
                tg_arg_better<T, Max>(vals[threadIdx.x + s], idxs[threadIdx.x + s],
                                      vals[threadIdx.x], idxs[threadIdx.x])) {
                vals[threadIdx.x] = vals[threadIdx.x + s];
                idxs[threadIdx.x] = idxs[threadIdx.x + s];
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) out[r] = idxs[0];
        __syncthreads();
    }
}

#define TG_REDUCTIONS(T, sfx)                                                              \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_sum_rows_##sfx(const T* x, T* out, long long rows, long long len, long long n) {    \
        tg_reduce_rows<T, TgSum<T> >(x, out, rows, len, n, 0);                             \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_max_rows_##sfx(const T* x, T* out, long long rows, long long len, long long n) {    \
        tg_reduce_rows<T, TgMax<T> >(x, out, rows, len, n, 0);                             \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_min_rows_##sfx(const T* x, T* out, long long rows, long long len, long long n) {    \
        tg_reduce_rows<T, TgMin<T> >(x, out, rows, len, n, 0);                             \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_argmax_rows_##sfx(const T* x, long long* out, long long rows, long long len) {      \
        tg_arg_rows<T, true>(x, out, rows, len);                                           \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_argmin_rows_##sfx(const T* x, long long* out, long long rows, long long len) {      \
        tg_arg_rows<T, false>(x, out, rows, len);                                          \
    }

#define TG_MEAN(T, sfx)                                                                    \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_mean_rows_##sfx(const T* x, T* out, long long rows, long long len, long long n,     \
                       long long divisor) {                                                \
        tg_reduce_rows<T, TgSum<T> >(x, out, rows, len, n, divisor);                       \
    }

TG_REDUCTIONS(float, f32)
TG_REDUCTIONS(double, f64)
TG_REDUCTIONS(long long, i64)
TG_MEAN(float, f32)
TG_MEAN(double, f64)
