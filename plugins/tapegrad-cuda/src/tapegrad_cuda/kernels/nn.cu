// tapegrad-cuda: softmax, log_softmax, logsumexp and cross_entropy, one block per row
// (grid-stride over rows), blockDim.x == TG_THREADS (256). kernels.py moves the axes
// being normalised last and makes x contiguous: row r is x[r*len : (r+1)*len], len >= 1.
//
//   tg_softmax_rows_<t>(const T* x, T* out, long long rows, long long len)
//   tg_log_softmax_rows_<t>(const T* x, T* out, long long rows, long long len)
//   tg_logsumexp_rows_<t>(const T* x, T* out, long long rows, long long len)   out[r]
//   tg_cross_entropy_rows_<t>(const T* x, const long long* labels, T* out,
//                             long long rows, long long len)
//       out[r] = logsumexp(row r) - x[r, labels[r]] (labels checked in range before launch)
//
// NOTE: as the CPU kernels, the row maximum m is subtracted before exp (no overflow), and
// a non-finite m (a row of -inf, or an inf entry) is replaced by 0 so x - m is never
// inf - inf: logsumexp of a row of -inf is then log(0) = -inf.
#include "common.cuh"

template <typename T> __device__ __forceinline__ T tg_exp(T x);
template <> __device__ __forceinline__ float tg_exp<float>(float x) { return expf(x); }
template <> __device__ __forceinline__ double tg_exp<double>(double x) { return exp(x); }
template <typename T> __device__ __forceinline__ T tg_log(T x);
template <> __device__ __forceinline__ float tg_log<float>(float x) { return logf(x); }
template <> __device__ __forceinline__ double tg_log<double>(double x) { return log(x); }

// Block-wide max (NaN-propagating) or sum of v; every thread gets the result.
template <typename T, bool Max> __device__ T tg_row_reduce(T v) {
    __shared__ T buf[TG_THREADS / 32];
    for (int off = 16; off > 0; off >>= 1) {
        T o = __shfl_down_sync(0xffffffffu, v, off);
        v = Max ? ((v != v || v > o) ? v : o) : v + o;
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    T r = buf[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) {
        T o = buf[w];
        r = Max ? ((r != r || r > o) ? r : o) : r + o;
    }
    __syncthreads();  // buf is reused by the next call
    return r;
}

// The shifted maximum m and s = sum(exp(x - m)) of one row.
template <typename T> __device__ void tg_row_stats(const T* row, long long len, T* m_out, T* s_out) {
    const T neg_inf = -tg_exp<T>(T(1000));  // -exp(1000) overflows to -inf in both precisions
    T m = neg_inf;
    for (long long j = threadIdx.x; j < len; j += blockDim.x) {
        T v = row[j];
        m = (m != m) ? m : ((v != v || v > m) ? v : m);
    }
    m = tg_row_reduce<T, true>(m);
    if (!isfinite(m)) m = T(0);
    T s = T(0);
    for (long long j = threadIdx.x; j < len; j += blockDim.x) s += tg_exp<T>(row[j] - m);
    s = tg_row_reduce<T, false>(s);
    *m_out = m;
    *s_out = s;
}

#define TG_NN(T, sfx)                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_softmax_rows_##sfx(const T* __restrict__ x, T* __restrict__ out, long long rows,    \
                          long long len) {                                                 \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                         \
            T m, s;                                                                        \
            tg_row_stats<T>(x + r * len, len, &m, &s);                                     \
            for (long long j = threadIdx.x; j < len; j += blockDim.x)                      \
                out[r * len + j] = tg_exp<T>(x[r * len + j] - m) / s;                      \
        }                                                                                  \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_log_softmax_rows_##sfx(const T* __restrict__ x, T* __restrict__ out, long long rows, \
                              long long len) {                                             \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                         \
            T m, s;                                                                        \
            tg_row_stats<T>(x + r * len, len, &m, &s);                                     \
            const T ls = tg_log<T>(s);                                                     \
            for (long long j = threadIdx.x; j < len; j += blockDim.x)                      \
                out[r * len + j] = (x[r * len + j] - m) - ls;                              \
        }                                                                                  \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_logsumexp_rows_##sfx(const T* __restrict__ x, T* __restrict__ out, long long rows,  \
                            long long len) {                                               \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                         \
            T m, s;                                                                        \
            tg_row_stats<T>(x + r * len, len, &m, &s);                                     \
            if (threadIdx.x == 0) out[r] = tg_log<T>(s) + m;                               \
        }                                                                                  \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_cross_entropy_rows_##sfx(const T* __restrict__ x, const long long* __restrict__ labels, \
                                T* __restrict__ out, long long rows, long long len) {      \
        for (long long r = blockIdx.x; r < rows; r += gridDim.x) {                         \
            T m, s;                                                                        \
            tg_row_stats<T>(x + r * len, len, &m, &s);                                     \
            if (threadIdx.x == 0)                                                          \
                out[r] = (tg_log<T>(s) + m) - x[r * len + labels[r]];                      \
        }                                                                                  \
    }

TG_NN(float, f32)
TG_NN(double, f64)
