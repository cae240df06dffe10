// tapegrad-cuda: elementwise kernels. Type suffixes: f32 float, f64 double, i32 int,
// i64 long long, b8 bool. Every kernel is extern "C" (looked up by name from Python) and
// uses a grid-stride loop, so any launch configuration covers any n.
//
//   tg_<unary>_<t>(const T* x, T* out, long long n)                 x contiguous
//   tg_<binary>_<t>(const T* a, const T* b, R* out, long long n)      same shape, contiguous
//   tg_<binary>_strided_<t>(const T* a, const T* b, R* out, long long n, int ndim,
//                           const long long* meta)
//       NumPy broadcasting: out is contiguous with shape meta[0:ndim]; a and b are read
//       through element strides meta[ndim:2*ndim] and meta[2*ndim:3*ndim] (0 on broadcast
//       axes). R is T for arithmetic, bool for comparisons and logical ops.
//   tg_where_<t>(const bool* c, const T* a, const T* b, T* out, long long n, int ndim,
//                const long long* meta)      meta: shape, c, a, b strides (4 * ndim)
//   tg_cast_<s>_<d>(const S* x, D* out, long long n, int ndim, const long long* meta)
//       out[off_out(i)] = (D) x[off_x(i)]; meta: shape, x strides, out strides. With s == d
//       it is the one strided copy: broadcast_to, making a view contiguous, copying into
//       a view (concatenate, setitem, copyto). Casting to bool is x != 0.
//   tg_fill_<t>(T* out, long long n, double value)
//   tg_<predicate>_<t>(const T* x, bool* out, long long n)    isnan/isinf/isfinite/signbit
//   tg_nan_to_num_<t>(const T* x, T* out, long long n, double nan, double posinf,
//                     double neginf)                  the replacements, as given (cast to T)
//   tg_ldexp_<t>(const T* x, const long long* e, T* out, long long n, int ndim,
//                const long long* meta)          x * 2**e, broadcast as the strided kernels
//       (meta: shape, x strides, e strides); e beyond int's range is clamped, as NumPy's
//   tg_round_<t>(const T* x, T* out, long long n, double factor, int divide_first)
//       NumPy's algorithm: rint(x * f) / f, or rint(x / f) * f when divide_first (negative
//       decimals), f = (T)factor computed on the host as NumPy's power_of_ten does.
//
// Every expression below is NumPy's loop for that ufunc (npymath's npy_divmod,
// npy_logaddexp, npy_heaviside, ...), so edge cases (division by zero, inf, NaN, the sign
// of a zero) give NumPy's results; integer division by zero gives 0 as NumPy's does.
#include "common.cuh"
#include "math.cuh"

__device__ __forceinline__ float  tg_sigmoid(float x)  { float e = expf(-fabsf(x)); float s = 1.0f / (1.0f + e); return x >= 0.0f ? s : e * s; }
__device__ __forceinline__ double tg_sigmoid(double x) { double e = exp(-fabs(x)); double s = 1.0 / (1.0 + e); return x >= 0.0 ? s : e * s; }
// NumPy's maximum/minimum propagate NaN from either side (a NaN test is false for ints).
template <typename T> __device__ __forceinline__ T tg_maximum(T a, T b) { return (a != a || a > b) ? a : b; }
template <typename T> __device__ __forceinline__ T tg_minimum(T a, T b) { return (a != a || a < b) ? a : b; }
template <typename T> __device__ __forceinline__ T tg_relu(T x) { return x > T(0) ? x : (x != x ? x : T(0)); }
template <typename T> __device__ __forceinline__ T tg_sign(T x) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x); }
template <typename T> __device__ __forceinline__ T tg_iabs(T x) { return x < T(0) ? -x : x; }
// binary_cross_entropy_with_logits per element: max(x, 0) - x t + log1p(exp(-|x|)).
__device__ __forceinline__ float  tg_bce(float x, float t)   { return fmaxf(x, 0.0f) - x * t + log1pf(expf(-fabsf(x))); }
__device__ __forceinline__ double tg_bce(double x, double t) { return fmax(x, 0.0) - x * t + log1p(exp(-fabs(x))); }

#define TG_UNARY(name, T, sfx, expr)                                                      \
    extern "C" __global__ void tg_##name##_##sfx(const T* __restrict__ x,                  \
                                                 T* __restrict__ out, long long n) {       \
        TG_GRID_LOOP(i, n) { T v = x[i]; out[i] = (expr); }                                \
    }

#define TG_BINARY(name, T, R, sfx, expr)                                                  \
    extern "C" __global__ void tg_##name##_##sfx(const T* __restrict__ a,                  \
                                                 const T* __restrict__ b,                  \
                                                 R* __restrict__ out, long long n) {       \
        TG_GRID_LOOP(i, n) { T u = a[i]; T v = b[i]; out[i] = (expr); }                    \
    }                                                                                      \
    extern "C" __global__ void tg_##name##_strided_##sfx(                                  \
        const T* __restrict__ a, const T* __restrict__ b, R* __restrict__ out,             \
        long long n, int ndim, const long long* __restrict__ meta) {                       \
        TG_GRID_LOOP(i, n) {                                                               \
            T u = a[tg_offset(i, ndim, meta, meta + ndim)];                                \
            T v = b[tg_offset(i, ndim, meta, meta + 2 * ndim)];                            \
            out[i] = (expr);                                                               \
        }                                                                                  \
    }

#define TG_PREDICATE(name, T, sfx, expr)                                                  \
    extern "C" __global__ void tg_##name##_##sfx(const T* __restrict__ x,                  \
                                                 bool* __restrict__ out, long long n) {    \
        TG_GRID_LOOP(i, n) { T v = x[i]; out[i] = (expr); }                                \
    }

#define TG_COMPARISONS(T, sfx)                                                            \
    TG_BINARY(equal, T, bool, sfx, u == v)                                                 \
    TG_BINARY(not_equal, T, bool, sfx, u != v)                                             \
    TG_BINARY(less, T, bool, sfx, u < v)                                                   \
    TG_BINARY(less_equal, T, bool, sfx, u <= v)                                            \
    TG_BINARY(greater, T, bool, sfx, u > v)                                                \
    TG_BINARY(greater_equal, T, bool, sfx, u >= v)                                         \
    extern "C" __global__ void tg_where_##sfx(                                             \
        const bool* __restrict__ c, const T* __restrict__ a, const T* __restrict__ b,      \
        T* __restrict__ out, long long n, int ndim, const long long* __restrict__ meta) {  \
        TG_GRID_LOOP(i, n) {                                                               \
            out[i] = c[tg_offset(i, ndim, meta, meta + ndim)]                              \
                ? a[tg_offset(i, ndim, meta, meta + 2 * ndim)]                             \
                : b[tg_offset(i, ndim, meta, meta + 3 * ndim)];                            \
        }                                                                                  \
    }                                                                                      \
    extern "C" __global__ void tg_fill_##sfx(T* __restrict__ out, long long n,             \
                                             double value) {                               \
        const T v = (T)value;                                                              \
        TG_GRID_LOOP(i, n) { out[i] = v; }                                                 \
    }

#define TG_FLOAT(T, sfx, F)                                                               \
    TG_UNARY(negative, T, sfx, -v)                                                         \
    TG_UNARY(abs, T, sfx, F(fabs)(v))                                                      \
    TG_UNARY(exp, T, sfx, F(exp)(v))                                                       \
    TG_UNARY(log, T, sfx, F(log)(v))                                                       \
    TG_UNARY(sqrt, T, sfx, F(sqrt)(v))                                                     \
    TG_UNARY(tanh, T, sfx, F(tanh)(v))                                                     \
    TG_UNARY(sin, T, sfx, F(sin)(v))                                                       \
    TG_UNARY(cos, T, sfx, F(cos)(v))                                                       \
    TG_UNARY(sigmoid, T, sfx, tg_sigmoid(v))                                               \
    TG_UNARY(relu, T, sfx, tg_relu(v))                                                     \
    TG_UNARY(square, T, sfx, v * v)                                                        \
    TG_UNARY(sign, T, sfx, tg_sign(v))                                                     \
    TG_BINARY(add, T, T, sfx, u + v)                                                       \
    TG_BINARY(subtract, T, T, sfx, u - v)                                                  \
    TG_BINARY(multiply, T, T, sfx, u * v)                                                  \
    TG_BINARY(divide, T, T, sfx, u / v)                                                    \
    TG_BINARY(power, T, T, sfx, F(pow)(u, v))                                              \
    TG_BINARY(maximum, T, T, sfx, tg_maximum(u, v))                                        \
    TG_BINARY(minimum, T, T, sfx, tg_minimum(u, v))                                        \
    TG_BINARY(bce_logits, T, T, sfx, tg_bce(u, v))                                         \
    TG_UNARY(tan, T, sfx, F(tan)(v))                                                       \
    TG_UNARY(sinh, T, sfx, F(sinh)(v))                                                     \
    TG_UNARY(cosh, T, sfx, F(cosh)(v))                                                     \
    TG_UNARY(arcsin, T, sfx, F(asin)(v))                                                   \
    TG_UNARY(arccos, T, sfx, F(acos)(v))                                                   \
    TG_UNARY(arctan, T, sfx, F(atan)(v))                                                   \
    TG_UNARY(arcsinh, T, sfx, F(asinh)(v))                                                 \
    TG_UNARY(arccosh, T, sfx, F(acosh)(v))                                                 \
    TG_UNARY(arctanh, T, sfx, F(atanh)(v))                                                 \
    TG_UNARY(log1p, T, sfx, F(log1p)(v))                                                   \
    TG_UNARY(expm1, T, sfx, F(expm1)(v))                                                   \
    TG_UNARY(log2, T, sfx, F(log2)(v))                                                     \
    TG_UNARY(log10, T, sfx, F(log10)(v))                                                   \
    TG_UNARY(exp2, T, sfx, F(exp2)(v))                                                     \
    TG_UNARY(reciprocal, T, sfx, T(1) / v)                                                 \
    TG_UNARY(cbrt, T, sfx, F(cbrt)(v))                                                     \
    TG_UNARY(sinc, T, sfx, tg_sinc(v))                                                     \
    TG_UNARY(deg2rad, T, sfx, v * (T(3.141592653589793238462643383279502884) / T(180)))    \
    TG_UNARY(rad2deg, T, sfx, v * (T(180) / T(3.141592653589793238462643383279502884)))    \
    TG_UNARY(floor, T, sfx, F(floor)(v))                                                   \
    TG_UNARY(ceil, T, sfx, F(ceil)(v))                                                     \
    TG_UNARY(trunc, T, sfx, F(trunc)(v))                                                   \
    TG_UNARY(rint, T, sfx, F(rint)(v))                                                     \
    TG_PREDICATE(isnan, T, sfx, isnan(v))                                                  \
    TG_PREDICATE(isinf, T, sfx, isinf(v))                                                  \
    TG_PREDICATE(isfinite, T, sfx, isfinite(v))                                            \
    TG_PREDICATE(signbit, T, sfx, signbit(v))                                              \
    TG_BINARY(arctan2, T, T, sfx, F(atan2)(u, v))                                          \
    TG_BINARY(hypot, T, T, sfx, F(hypot)(u, v))                                            \
    TG_BINARY(logaddexp, T, T, sfx, tg_logaddexp(u, v))                                    \
    TG_BINARY(logaddexp2, T, T, sfx, tg_logaddexp2(u, v))                                  \
    TG_BINARY(copysign, T, T, sfx, F(copysign)(u, v))                                      \
    TG_BINARY(heaviside, T, T, sfx, tg_heaviside(u, v))                                    \
    TG_BINARY(fmax, T, T, sfx, F(fmax)(u, v))                                              \
    TG_BINARY(fmin, T, T, sfx, F(fmin)(u, v))                                              \
    TG_BINARY(remainder, T, T, sfx, tg_fremainder(u, v))                                   \
    TG_BINARY(fmod, T, T, sfx, F(fmod)(u, v))                                              \
    TG_BINARY(floor_divide, T, T, sfx, tg_ffloor_divide(u, v))                             \
    extern "C" __global__ void tg_nan_to_num_##sfx(const T* __restrict__ x,                \
                                                   T* __restrict__ out, long long n,       \
                                                   double nan, double posinf,              \
                                                   double neginf) {                        \
        const T a = (T)nan, b = (T)posinf, c = (T)neginf;                                  \
        TG_GRID_LOOP(i, n) { out[i] = tg_nan_to_num(x[i], a, b, c); }                      \
    }                                                                                      \
    extern "C" __global__ void tg_round_##sfx(const T* __restrict__ x, T* __restrict__ out, \
                                              long long n, double factor,                  \
                                              int divide_first) {                          \
        const T f = (T)factor;                                                             \
        TG_GRID_LOOP(i, n) {                                                               \
            out[i] = tg_round(x[i], f, divide_first != 0);                                 \
        }                                                                                  \
    }                                                                                      \
    extern "C" __global__ void tg_ldexp_##sfx(const T* __restrict__ x,                     \
                                              const long long* __restrict__ e,             \
                                              T* __restrict__ out, long long n, int ndim,  \
                                              const long long* __restrict__ meta) {        \
        TG_GRID_LOOP(i, n) {                                                               \
            const long long k = e[tg_offset(i, ndim, meta, meta + 2 * ndim)];              \
            const int k32 = k > 2147483647LL ? 2147483647                                  \
                                             : (k < -2147483647LL ? -2147483647 : (int)k); \
            out[i] = F(ldexp)(x[tg_offset(i, ndim, meta, meta + ndim)], k32);              \
        }                                                                                  \
    }                                                                                      \
    TG_COMPARISONS(T, sfx)

#define TG_INT(T, sfx)                                                                    \
    TG_UNARY(negative, T, sfx, -v)                                                         \
    TG_UNARY(abs, T, sfx, tg_iabs(v))                                                      \
    TG_UNARY(square, T, sfx, v * v)                                                        \
    TG_UNARY(sign, T, sfx, tg_sign(v))                                                     \
    TG_BINARY(add, T, T, sfx, u + v)                                                       \
    TG_BINARY(subtract, T, T, sfx, u - v)                                                  \
    TG_BINARY(multiply, T, T, sfx, u * v)                                                  \
    TG_BINARY(maximum, T, T, sfx, tg_maximum(u, v))                                        \
    TG_BINARY(minimum, T, T, sfx, tg_minimum(u, v))                                        \
    TG_UNARY(reciprocal, T, sfx, tg_ireciprocal(v))                                        \
    TG_BINARY(remainder, T, T, sfx, tg_iremainder(u, v))                                   \
    TG_BINARY(fmod, T, T, sfx, tg_ifmod(u, v))                                             \
    TG_BINARY(floor_divide, T, T, sfx, tg_ifloor_divide(u, v))                             \
    TG_COMPARISONS(T, sfx)

// float: the f-suffixed CUDA math functions (expf, ...); double: the plain ones.
#define TG_MATH_F32(fn) fn##f
#define TG_MATH_F64(fn) fn
TG_FLOAT(float, f32, TG_MATH_F32)
TG_FLOAT(double, f64, TG_MATH_F64)
TG_INT(int, i32)
TG_INT(long long, i64)
TG_COMPARISONS(bool, b8)
TG_BINARY(logical_and, bool, bool, b8, u && v)
TG_BINARY(logical_or, bool, bool, b8, u || v)
TG_UNARY(logical_not, bool, b8, !v)

// ---- casts and strided copies ---------------------------------------------------------
template <typename D, typename S> __device__ __forceinline__ D tg_convert(S x) { return (D)x; }
#define TG_TO_BOOL(S) \
    template <> __device__ __forceinline__ bool tg_convert<bool, S>(S x) { return x != (S)0; }
TG_TO_BOOL(float)
TG_TO_BOOL(double)
TG_TO_BOOL(int)
TG_TO_BOOL(long long)

#define TG_CAST(S, ssfx, D, dsfx)                                                         \
    extern "C" __global__ void tg_cast_##ssfx##_##dsfx(                                    \
        const S* __restrict__ x, D* __restrict__ out, long long n, int ndim,               \
        const long long* __restrict__ meta) {                                              \
        TG_GRID_LOOP(i, n) {                                                               \
            out[tg_offset(i, ndim, meta, meta + 2 * ndim)] =                               \
                tg_convert<D, S>(x[tg_offset(i, ndim, meta, meta + ndim)]);                \
        }                                                                                  \
    }
#define TG_CAST_FROM(S, ssfx)                                                             \
    TG_CAST(S, ssfx, float, f32) TG_CAST(S, ssfx, double, f64) TG_CAST(S, ssfx, int, i32)  \
    TG_CAST(S, ssfx, long long, i64) TG_CAST(S, ssfx, bool, b8)
TG_CAST_FROM(float, f32)
TG_CAST_FROM(double, f64)
TG_CAST_FROM(int, i32)
TG_CAST_FROM(long long, i64)
TG_CAST_FROM(bool, b8)
