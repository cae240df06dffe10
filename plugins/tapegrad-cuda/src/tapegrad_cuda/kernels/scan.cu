// tapegrad-cuda: scans and sorting along rows. Callers move the axis last and make the
// input contiguous, so a scan or a sort is "one row after another". Type suffixes as in
// elementwise.cu.
//
//   tg_cumsum_rows_<t>(const T* x, T* out, long long rows, long long len)
//   tg_cumprod_rows_<t>(...)     out[r, j] = x[r, 0] + ... + x[r, j] (or the product).
//       One block of TG_THREADS (256) threads per row (grid-stride over rows): the row is
//       scanned in chunks of 256 (warp shuffles, then the warp totals), each chunk starting
//       from the total of the ones before it. NOTE: the sums are grouped differently from
//       NumPy's strictly left-to-right loop, so float results agree to rounding only.
//
// Sorting is a bitonic sort over every row at once, padded to P = the next power of two of
// len: init, then one step launch per (k, j) with k = 2, 4, ..., P and j = k/2, ..., 1,
// then fini. Elements are (value, original position) pairs ordered by math.cuh's
// tg_sort_less: pads (position >= len) last, then NaN (NumPy's order), then the value, ties
// by position -- a total order, so the result is the stable sort (NumPy's kind="stable").
//
//   tg_sort_init_<t>(const T* x, T* vals, long long* pos, long long rows, long long len,
//                    long long P)           vals/pos[r * P + j] = x[r * len + j], j (or pad)
//   tg_sort_step_<t>(T* vals, long long* pos, long long rows, long long len, long long P,
//                    long long k, long long j)
//       element i of a row and its partner l = i ^ j (l > i) are swapped when out of the
//       order of their k-block (ascending when i & k == 0)
//   tg_sort_fini_<t>(const T* vals, const long long* pos, T* out, long long* out_pos,
//                    long long rows, long long len, long long P)
//       out[r * len + j] = vals[r * P + j]; out_pos the same from pos (argsort)
//
//   tg_interp_segment_<t>(const T* x, const T* xp, long long* out, long long n, long long m)
//       out[i] = clip(searchsorted(xp, x[i], side="right") - 1, 0, max(m - 2, 0)): the
//       segment of the increasing xp (length m) that holds x[i] (tg.interp's)
//   tg_convolve_<t>(const T* a, long long n, const T* v, long long m, T* out, long long len,
//                   long long start)
//       out[k] = sum_i a[i] * v[k + start - i] over the i in range: numpy.convolve's 'full'
//       result from position `start` on (start and len pick 'same' / 'valid'), one thread
//       per output element
#include "common.cuh"
#include "math.cuh"

template <typename T> struct TgScanSum {
    __device__ static T identity() { return T(0); }
    __device__ static T combine(T a, T b) { return a + b; }
};
template <typename T> struct TgScanProd {
    __device__ static T identity() { return T(1); }
    __device__ static T combine(T a, T b) { return a * b; }
};

template <typename T, typename Op>
__device__ void tg_scan_rows(const T* __restrict__ x, T* __restrict__ out, long long rows,
                             long long len) {
    __shared__ T warp_tot[TG_THREADS / 32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = (int)(blockDim.x >> 5);
    for (long long r = blockIdx.x; r < rows; r += gridDim.x) {
        T carry = Op::identity();
        for (long long base = 0; base < len; base += blockDim.x) {
            const long long j = base + threadIdx.x;
            T v = j < len ? x[r * len + j] : Op::identity();
            for (int off = 1; off < 32; off <<= 1) {     // inclusive scan within the warp
                T o = __shfl_up_sync(0xffffffffu, v, off);
                if (lane >= off) v = Op::combine(o, v);
            }
            if (lane == 31) warp_tot[warp] = v;
            __syncthreads();
            T before = Op::identity(), total = Op::identity();
            for (int w = 0; w < warps; ++w) {
                if (w < warp) before = Op::combine(before, warp_tot[w]);
                total = Op::combine(total, warp_tot[w]);
            }
            if (j < len) out[r * len + j] = Op::combine(carry, Op::combine(before, v));
            carry = Op::combine(carry, total);        // the same in every thread
            __syncthreads();                          // warp_tot is rewritten next chunk
        }
    }
}

#define TG_SCAN(T, sfx)                                                                    \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_cumsum_rows_##sfx(const T* x, T* out, long long rows, long long len) {              \
        tg_scan_rows<T, TgScanSum<T> >(x, out, rows, len);                                 \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_THREADS)                               \
    tg_cumprod_rows_##sfx(const T* x, T* out, long long rows, long long len) {             \
        tg_scan_rows<T, TgScanProd<T> >(x, out, rows, len);                                \
    }

#define TG_SORT(T, sfx)                                                                    \
    extern "C" __global__ void tg_sort_init_##sfx(const T* __restrict__ x, T* __restrict__ vals, \
                                                  long long* __restrict__ pos, long long rows, \
                                                  long long len, long long P) {            \
        TG_GRID_LOOP(t, rows * P) {                                                        \
            const long long r = t / P, j = t % P;                                          \
            vals[t] = j < len ? x[r * len + j] : (T)0;                                     \
            pos[t] = j;                                                                    \
        }                                                                                  \
    }                                                                                      \
    extern "C" __global__ void tg_sort_step_##sfx(T* __restrict__ vals,                    \
                                                  long long* __restrict__ pos, long long rows, \
                                                  long long len, long long P, long long k, \
                                                  long long j) {                           \
        TG_GRID_LOOP(t, rows * P) { tg_sort_step_at(vals, pos, t, len, P, k, j); }         \
    }                                                                                      \
    extern "C" __global__ void tg_sort_fini_##sfx(const T* __restrict__ vals,              \
                                                  const long long* __restrict__ pos,       \
                                                  T* __restrict__ out,                     \
                                                  long long* __restrict__ out_pos,         \
                                                  long long rows, long long len, long long P) { \
        TG_GRID_LOOP(t, rows * len) {                                                      \
            const long long r = t / len, j = t % len;                                      \
            out[t] = vals[r * P + j];                                                      \
            out_pos[t] = pos[r * P + j];                                                   \
        }                                                                                  \
    }

TG_SCAN(float, f32)
TG_SCAN(double, f64)
TG_SCAN(int, i32)
TG_SCAN(long long, i64)
TG_SORT(float, f32)
TG_SORT(double, f64)
TG_SORT(int, i32)
TG_SORT(long long, i64)

#define TG_SEARCH(T, sfx)                                                                  \
    extern "C" __global__ void tg_interp_segment_##sfx(const T* __restrict__ x,            \
                                                       const T* __restrict__ xp,           \
                                                       long long* __restrict__ out,        \
                                                       long long n, long long m) {         \
        const long long top = m > 2 ? m - 2 : 0;                                           \
        TG_GRID_LOOP(i, n) {                                                               \
            const long long j = tg_search_right(xp, m, x[i]) - 1;                          \
            out[i] = j < 0 ? 0 : (j > top ? top : j);                                      \
        }                                                                                  \
    }
#define TG_CONVOLVE(T, sfx)                                                                \
    extern "C" __global__ void tg_convolve_##sfx(const T* __restrict__ a, long long n,     \
                                                 const T* __restrict__ v, long long m,     \
                                                 T* __restrict__ out, long long len,       \
                                                 long long start) {                        \
        TG_GRID_LOOP(k, len) {                                                             \
            const long long f = k + start;          /* position in the full result */      \
            const long long lo = f - m + 1 > 0 ? f - m + 1 : 0;                            \
            const long long hi = f < n - 1 ? f : n - 1;                                    \
            T acc = T(0);                                                                  \
            for (long long i = lo; i <= hi; ++i) acc += a[i] * v[f - i];                   \
            out[k] = acc;                                                                  \
        }                                                                                  \
    }

TG_SEARCH(float, f32)
TG_SEARCH(double, f64)
TG_SEARCH(int, i32)
TG_SEARCH(long long, i64)
TG_CONVOLVE(float, f32)
TG_CONVOLVE(double, f64)
