// tapegrad-cuda: sum and max reductions (float32 "_f32" and float64 "_f64").
//
//   tg_<op>_all_<t>(const T* x, T* partial, long long n)
//       one pass of a full reduction: block b writes the reduction of its grid-stride
//       share of x[0:n] to partial[b]. Launch with blockDim.x == TG_REDUCE_THREADS (256)
//       and call again on `partial` (n = gridDim.x of the previous pass) with one block
//       to finish. Max of an empty array is an error the Python wrapper raises first.
//   tg_<op>_axis_<t>(const T* x, T* out, long long outer, long long len, long long inner)
//       reduce a contiguous x viewed as (outer, len, inner) over its middle axis:
//       out[o * inner + k] = op over j of x[(o * len + j) * inner + k]; one thread per
//       output element, grid-stride over outer * inner.
// Max propagates NaN like NumPy.

#define TG_REDUCE_THREADS 256

template <typename T> struct TgSum {
    __device__ static T identity() { return T(0); }
    __device__ static T combine(T a, T b) { return a + b; }
};
template <typename T> struct TgMax {
    __device__ static T identity() { return -T(__int_as_float(0x7f800000)); }  // -inf
    __device__ static T combine(T a, T b) { return (a != a || a > b) ? a : b; }
};

template <typename T, typename Op>
__device__ void tg_reduce_all(const T* __restrict__ x, T* __restrict__ partial, long long n) {
    __shared__ T warp_vals[TG_REDUCE_THREADS / 32];
    T acc = Op::identity();
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x)
        acc = Op::combine(acc, x[i]);
    for (int off = 16; off > 0; off >>= 1)
        acc = Op::combine(acc, __shfl_down_sync(0xffffffffu, acc, off));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_vals[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (int)(blockDim.x >> 5) ? warp_vals[lane] : Op::identity();
        for (int off = 16; off > 0; off >>= 1)
            acc = Op::combine(acc, __shfl_down_sync(0xffffffffu, acc, off));
        if (lane == 0) partial[blockIdx.x] = acc;
    }
}

template <typename T, typename Op>
__device__ void tg_reduce_axis(const T* __restrict__ x, T* __restrict__ out, long long outer,
                               long long len, long long inner) {
    const long long n = outer * inner;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        const long long o = i / inner, k = i % inner;
        const T* p = x + o * len * inner + k;
        T acc = Op::identity();
        for (long long j = 0; j < len; ++j) acc = Op::combine(acc, p[j * inner]);
        out[i] = acc;
    }
}

#define TG_REDUCTIONS(T, sfx)                                                              \
    extern "C" __global__ void __launch_bounds__(TG_REDUCE_THREADS)                        \
    tg_sum_all_##sfx(const T* x, T* partial, long long n) {                                \
        tg_reduce_all<T, TgSum<T> >(x, partial, n);                                        \
    }                                                                                      \
    extern "C" __global__ void __launch_bounds__(TG_REDUCE_THREADS)                        \
    tg_max_all_##sfx(const T* x, T* partial, long long n) {                                \
        tg_reduce_all<T, TgMax<T> >(x, partial, n);                                        \
    }                                                                                      \
    extern "C" __global__ void tg_sum_axis_##sfx(const T* x, T* out, long long outer,      \
                                                 long long len, long long inner) {         \
        tg_reduce_axis<T, TgSum<T> >(x, out, outer, len, inner);                           \
    }                                                                                      \
    extern "C" __global__ void tg_max_axis_##sfx(const T* x, T* out, long long outer,      \
                                                 long long len, long long inner) {         \
        tg_reduce_axis<T, TgMax<T> >(x, out, outer, len, inner);                           \
    }

TG_REDUCTIONS(float, f32)
TG_REDUCTIONS(double, f64)
