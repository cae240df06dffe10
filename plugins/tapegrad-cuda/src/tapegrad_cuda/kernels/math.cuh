// tapegrad-cuda: the scalar arithmetic of issue 14's elementwise kernels, where a NumPy
// loop is more than one CUDA math function (npymath's npy_divmod, npy_logaddexp,
// npy_heaviside, NumPy's integer division, numpy.sinc, numpy.nan_to_num).
//
// Every function is TG_HD (host and device): besides the kernels of elementwise.cu,
// tests/test_cuda_kernels.py compiles them into a host program with nvcc and checks them
// against NumPy on edge values (zeros, infinities, NaN, MIN // -1), which is as close as a
// machine without a GPU gets to running them.
#pragma once
#include "common.cuh"

// NumPy's npy_divmod (floor_divide and remainder of floats): the result takes the sign of
// the divisor; a zero divisor gives fmod's NaN and a / b.
template <typename T> TG_HD T tg_fremainder(T a, T b) {
    T mod = fmod(a, b);
    if (b == T(0)) return mod;
    if (mod != T(0)) {
        if ((b < T(0)) != (mod < T(0))) mod += b;
    } else {
        mod = copysign(T(0), b);
    }
    return mod;
}
template <typename T> TG_HD T tg_ffloor_divide(T a, T b) {
    if (b == T(0)) return a / b;
    T mod = fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
    if (div != T(0)) {
        T fl = floor(div);
        if (div - fl > T(0.5)) fl += T(1);
        return fl;
    }
    return copysign(T(0), a / b);
}
// Integer division as NumPy's loops: division by zero gives 0, MIN // -1 gives MIN (it
// wraps), MIN % -1 gives 0 (C leaves both undefined).
template <typename T> TG_HD T tg_imin() {     // no signed overflow
    return -T(~0ULL >> (65 - 8 * sizeof(T))) - T(1);
}
template <typename T> TG_HD T tg_ifloor_divide(T a, T b) {
    if (b == T(0)) return T(0);
    if (b == T(-1)) return a == tg_imin<T>() ? a : -a;
    T q = a / b;
    if ((a % b != T(0)) && ((a < T(0)) != (b < T(0)))) q -= T(1);
    return q;
}
template <typename T> TG_HD T tg_iremainder(T a, T b) {
    if (b == T(0) || b == T(-1)) return T(0);
    T r = a % b;
    return (r == T(0) || ((r < T(0)) == (b < T(0)))) ? r : r + b;
}
template <typename T> TG_HD T tg_ifmod(T a, T b) {
    return (b == T(0) || b == T(-1)) ? T(0) : a % b;
}
// NumPy's integer reciprocal is (T)(1.0 / x): 0 for |x| > 1, and 1.0 / 0 = inf converted
// to an integer, which is MIN on x86 (the CPU kernel): written out, since the device's
// conversion saturates instead.
template <typename T> TG_HD T tg_ireciprocal(T x) {
    if (x == T(0)) return tg_imin<T>();
    return (x == T(1) || x == T(-1)) ? x : T(0);
}
// npy_logaddexp / npy_logaddexp2: equal arguments (also infinities of one sign) first.
template <typename T> TG_HD T tg_logaddexp(T x, T y) {
    if (x == y) return x + T(0.693147180559945309417232121458176568);
    const T d = x - y;
    if (d > T(0)) return x + log1p(exp(-d));
    if (d <= T(0)) return y + log1p(exp(d));
    return d;                                   // NaN
}
template <typename T> TG_HD T tg_logaddexp2(T x, T y) {
    const T log2e = T(1.442695040888963407359924681001892137);
    if (x == y) return x + T(1);
    const T d = x - y;
    if (d > T(0)) return x + log2e * log1p(exp2(-d));
    if (d <= T(0)) return y + log2e * log1p(exp2(d));
    return d;
}
template <typename T> TG_HD T tg_heaviside(T x, T h0) {
    if (x != x) return x;
    if (x == T(0)) return h0;
    return x < T(0) ? T(0) : T(1);
}
// numpy.sinc: sin(y) / y with y = pi * (x == 0 ? 1e-20 : x), in T.
template <typename T> TG_HD T tg_sinc(T x) {
    const T y = T(3.141592653589793238462643383279502884) * (x == T(0) ? T(1e-20) : x);
    return sin(y) / y;
}
template <typename T> TG_HD T tg_nan_to_num(T x, T nan, T posinf, T neginf) {
    if (x != x) return nan;
    if (isinf(x)) return x > T(0) ? posinf : neginf;
    return x;
}
// numpy.round's algorithm: rint(x * f) / f, or rint(x / f) * f for negative decimals.
template <typename T> TG_HD T tg_round(T x, T f, bool divide_first) {
    return divide_first ? rint(x / f) * f : rint(x * f) / f;
}
// The order of scan.cu's sort: (value, original position) pairs with pads (position >=
// len) last, then NaN (NumPy's order), then by value, ties (-0.0 == 0.0 too) by position.
template <typename T> TG_HD bool tg_sort_less(T a, long long ia, T b, long long ib, long long len) {
    const bool ap = ia >= len, bp = ib >= len;
    if (ap || bp) return ap == bp ? ia < ib : bp;
    const bool an = a != a, bn = b != b;
    if (an || bn) return an == bn ? ia < ib : bn;
    if (a < b) return true;
    if (b < a) return false;
    return ia < ib;
}
// One compare-exchange of a bitonic sort step (scan.cu's tg_sort_step): element t of the
// rows-of-P buffers and its partner in the same row, i ^ j, swapped when out of the order
// of their k-block (ascending where i & k == 0). Each pair is touched by one t only.
template <typename T> TG_HD void tg_sort_step_at(T* vals, long long* pos, long long t,
                                                 long long len, long long P, long long k,
                                                 long long j) {
    const long long i = t % P, l = i ^ j;
    if (l <= i) return;
    const long long a = t, b = t - i + l;
    const bool swap = (i & k) == 0 ? tg_sort_less(vals[b], pos[b], vals[a], pos[a], len)
                                   : tg_sort_less(vals[a], pos[a], vals[b], pos[b], len);
    if (swap) {
        const T v = vals[a];
        vals[a] = vals[b];
        vals[b] = v;
        const long long p = pos[a];
        pos[a] = pos[b];
        pos[b] = p;
    }
}
// numpy.searchsorted(xp, x, side="right") in NumPy's order (NaN after every number): the
// first i with x < xp[i], by NumPy's own binary search (npysort's binsearch).
template <typename T> TG_HD bool tg_nan_less(T a, T b) { return a < b || (b != b && a == a); }
template <typename T> TG_HD long long tg_search_right(const T* xp, long long m, T x) {
    long long lo = 0, hi = m;
    while (lo < hi) {
        const long long mid = lo + (hi - lo) / 2;
        if (tg_nan_less(x, xp[mid])) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}
