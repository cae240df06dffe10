// tapegrad-cuda: elementwise kernels (float32 "_f32" and float64 "_f64").
//
// Every kernel is extern "C" (unmangled names, looked up by name from Python) and uses a
// grid-stride loop, so any launch configuration covers any n.
//
//   tg_<unary>_<t>(const T* x, T* out, long long n)           x contiguous
//   tg_<binary>_<t>(const T* a, const T* b, T* out, long long n) same shape, contiguous
//   tg_<binary>_strided_<t>(const T* a, const T* b, T* out, long long n,
//                           int ndim, const long long* meta)
//       NumPy broadcasting: out is contiguous with shape meta[0:ndim]; a and b are read
//       through element strides meta[ndim:2*ndim] and meta[2*ndim:3*ndim] (stride 0 on a
//       broadcast axis). Also covers non-contiguous inputs.
//   tg_copy_strided_<t>(const T* x, T* out, long long n, int ndim, const long long* meta)
//       gather x (strides meta[ndim:2*ndim]) into contiguous out (shape meta[0:ndim]):
//       broadcast_to and making a view contiguous.

#define TG_GRID_LOOP(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)

// Offset (in elements) of flat output index i in an array with the given strides.
__device__ __forceinline__ long long tg_offset(long long i, int ndim, const long long* shape,
                                               const long long* strides) {
    long long off = 0;
    for (int d = ndim - 1; d >= 0; --d) {
        long long s = shape[d];
        off += (i % s) * strides[d];
        i /= s;
    }
    return off;
}

// ---- scalar functions -------------------------------------------------------------
__device__ __forceinline__ float  tg_sigmoid(float x)  { return x >= 0.0f ? 1.0f / (1.0f + expf(-x)) : expf(x) / (1.0f + expf(x)); }
__device__ __forceinline__ double tg_sigmoid(double x) { return x >= 0.0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }
// NumPy's maximum/minimum propagate NaN from either side.
template <typename T> __device__ __forceinline__ T tg_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> __device__ __forceinline__ T tg_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
template <typename T> __device__ __forceinline__ T tg_relu(T x) { return x > T(0) ? x : (x != x ? x : T(0)); }

#define TG_UNARY(name, T, sfx, expr)                                                      \
    extern "C" __global__ void tg_##name##_##sfx(const T* __restrict__ x,                  \
                                                 T* __restrict__ out, long long n) {       \
        TG_GRID_LOOP(i, n) { T v = x[i]; out[i] = (expr); }                                \
    }

#define TG_BINARY(name, T, sfx, expr)                                                     \
    extern "C" __global__ void tg_##name##_##sfx(const T* __restrict__ a,                  \
                                                 const T* __restrict__ b,                  \
                                                 T* __restrict__ out, long long n) {       \
        TG_GRID_LOOP(i, n) { T u = a[i]; T v = b[i]; out[i] = (expr); }                    \
    }                                                                                      \
    extern "C" __global__ void tg_##name##_strided_##sfx(                                  \
        const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ out,             \
        long long n, int ndim, const long long* __restrict__ meta) {                       \
        TG_GRID_LOOP(i, n) {                                                               \
            T u = a[tg_offset(i, ndim, meta, meta + ndim)];                                \
            T v = b[tg_offset(i, ndim, meta, meta + 2 * ndim)];                            \
            out[i] = (expr);                                                               \
        }                                                                                  \
    }

#define TG_ALL(T, sfx, F)                                                                 \
    TG_UNARY(negative, T, sfx, -v)                                                         \
    TG_UNARY(abs, T, sfx, F(fabs)(v))                                                       \
    TG_UNARY(exp, T, sfx, F(exp)(v))                                                       \
    TG_UNARY(log, T, sfx, F(log)(v))                                                       \
    TG_UNARY(sqrt, T, sfx, F(sqrt)(v))                                                     \
    TG_UNARY(tanh, T, sfx, F(tanh)(v))                                                     \
    TG_UNARY(sin, T, sfx, F(sin)(v))                                                       \
    TG_UNARY(cos, T, sfx, F(cos)(v))                                                       \
    TG_UNARY(sigmoid, T, sfx, tg_sigmoid(v))                                               \
    TG_UNARY(relu, T, sfx, tg_relu(v))                                                     \
    TG_BINARY(add, T, sfx, u + v)                                                          \
    TG_BINARY(subtract, T, sfx, u - v)                                                     \
    TG_BINARY(multiply, T, sfx, u * v)                                                     \
    TG_BINARY(divide, T, sfx, u / v)                                                       \
    TG_BINARY(power, T, sfx, F(pow)(u, v))                                                 \
    TG_BINARY(maximum, T, sfx, tg_maximum(u, v))                                           \
    TG_BINARY(minimum, T, sfx, tg_minimum(u, v))                                           \
    extern "C" __global__ void tg_copy_strided_##sfx(                                      \
        const T* __restrict__ x, T* __restrict__ out, long long n, int ndim,               \
        const long long* __restrict__ meta) {                                              \
        TG_GRID_LOOP(i, n) { out[i] = x[tg_offset(i, ndim, meta, meta + ndim)]; }          \
    }

// float: the f-suffixed CUDA math functions (expf, ...); double: the plain ones.
#define TG_MATH_F32(fn) fn##f
#define TG_MATH_F64(fn) fn
TG_ALL(float, f32, TG_MATH_F32)
TG_ALL(double, f64, TG_MATH_F64)
