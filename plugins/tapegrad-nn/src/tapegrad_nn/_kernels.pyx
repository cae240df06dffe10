# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""C kernels of the nn ops whose NumPy versions made several passes (each with its
temporary array) over small activations: batch norm's per-channel statistics, the
standardisation and its backward over (N, C, L) arrays, the per-channel affine and its
reductions, max pooling's window argmax, gather and scatter, and cross-entropy with
class labels (its forward and the backward's softmax - one_hot, one pass each).

Each function here is the *kernel* of an op registered in normalization.py or pooling.py
(or a piece of one; cross-entropy's are in functional.py); the op's rule is still written in tapegrad ops there, so higher
orders are unchanged. The Python caller decides when a kernel can run (ndarrays of one
dtype, float32 or float64, the shapes below) and runs its NumPy version otherwise.

NOTE: [accuracy] Sums over a channel (N*L values) accumulate in double for float32 and
float64 alike (four partial sums per row, so the adds pipeline), then are rounded once to
the data's type; the elementwise arithmetic is in the data's own type (the constants are
``floating`` locals: a bare ``1.0`` is a C double and would promote float32 work). So a
float32 result is float32, at least as accurate as NumPy's float32 pairwise sums. The
variance is two-pass (the sum of squared deviations from the mean), never
E[x^2] - E[x]^2, which cancels catastrophically for data with a large mean.

Arrays come in as typed memoryviews (contiguous where the ``::1`` says so; the caller
makes them so) and the loops run without the GIL.
"""

cimport cython
from cython cimport floating
from libc.math cimport log, logf, sqrt
from libc.stdint cimport int64_t
from libc.string cimport memcpy

import numpy as np


# ---------------------------------------------------------------------------------------
# Row reductions in double. NOTE: eight independent accumulators, one per lane, written
# as an array updated in a fixed order: the compiler vectorises that (SSE2 is enough)
# without reassociating anything, so the result does not depend on the build's flags.
# ---------------------------------------------------------------------------------------

cdef inline double _lanes_total(double* s) noexcept nogil:
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))


cdef inline double _row_sum(const floating* p, Py_ssize_t n) noexcept nogil:
    cdef double s[8]
    cdef Py_ssize_t i = 0, k
    for k in range(8):
        s[k] = 0
    while i + 8 <= n:
        for k in range(8):
            s[k] += p[i + k]
        i += 8
    while i < n:
        s[0] += p[i]
        i += 1
    return _lanes_total(s)


cdef inline double _row_dot(const floating* a, const floating* b, Py_ssize_t n) noexcept nogil:
    cdef double s[8]
    cdef Py_ssize_t i = 0, k
    for k in range(8):
        s[k] = 0
    while i + 8 <= n:
        for k in range(8):
            s[k] += <double>a[i + k] * <double>b[i + k]
        i += 8
    while i < n:
        s[0] += <double>a[i] * <double>b[i]
        i += 1
    return _lanes_total(s)


cdef inline double _row_sq_dev(const floating* p, double mean, Py_ssize_t n) noexcept nogil:
    cdef double s[8]
    cdef double d
    cdef Py_ssize_t i = 0, k
    for k in range(8):
        s[k] = 0
    while i + 8 <= n:
        for k in range(8):
            d = p[i + k] - mean
            s[k] += d * d
        i += 8
    while i < n:
        d = p[i] - mean
        s[0] += d * d
        i += 1
    return _lanes_total(s)


cdef void _channel_mean_m2(const floating* x, Py_ssize_t n, Py_ssize_t c, Py_ssize_t length,
                           double* mean, double* m2) noexcept nogil:
    """Per channel of x (n, c, length): the mean and the sum of squared deviations from it
    (two passes, in memory order: each (sample, channel) row is contiguous)."""
    cdef Py_ssize_t i, j
    cdef double count = <double>(n * length)
    for j in range(c):
        mean[j] = 0
        m2[j] = 0
    for i in range(n):
        for j in range(c):
            mean[j] += _row_sum(x + (i * c + j) * length, length)
    for j in range(c):
        mean[j] /= count
    for i in range(n):
        for j in range(c):
            m2[j] += _row_sq_dev(x + (i * c + j) * length, mean[j], length)


# ---------------------------------------------------------------------------------------
# Batch norm over (N, C, L) arrays
# ---------------------------------------------------------------------------------------

def channel_moments(const floating[:, :, ::1] x):
    """(mean, m2) per channel of x (N, C, L), float64 arrays of shape (C,): the mean and
    the sum of squared deviations from it over axes 0 and 2."""
    cdef Py_ssize_t n = x.shape[0], c = x.shape[1], length = x.shape[2]
    mean = np.zeros(c, np.float64)
    m2 = np.zeros(c, np.float64)
    cdef double[::1] mv = mean, m2v = m2
    if n * length > 0:
        with nogil:
            _channel_mean_m2(&x[0, 0, 0], n, c, length, &mv[0], &m2v[0])
    return mean, m2


def standardize_channels(const floating[:, :, ::1] x, double eps):
    """(y, r) of x (N, C, L): y = (x - mean) * r per channel, r = 1 / sqrt(var + eps)
    (biased variance over axes 0 and 2), r of shape (C,); both in x's dtype."""
    cdef Py_ssize_t n = x.shape[0], c = x.shape[1], length = x.shape[2], i, j, k
    dtype = np.float32 if floating is float else np.float64
    y = np.empty((n, c, length), dtype)
    r = np.empty(c, dtype)
    cdef floating[:, :, ::1] yv = y
    cdef floating[::1] rv = r
    if n * length == 0 or c == 0:
        r[...] = 1.0 / np.sqrt(np.float64(np.nan) + eps)   # NumPy's mean of nothing: nan
        return y, r
    cdef double[::1] mean = np.empty(c, np.float64), m2 = np.empty(c, np.float64)
    cdef floating m, s
    cdef const floating* xp
    cdef floating* yp
    cdef double count = <double>(n * length)
    with nogil:
        _channel_mean_m2(&x[0, 0, 0], n, c, length, &mean[0], &m2[0])
        for j in range(c):
            rv[j] = <floating>(1.0 / sqrt(m2[j] / count + eps))
        for i in range(n):
            for j in range(c):
                m = <floating>mean[j]
                s = rv[j]
                xp = &x[i, j, 0]
                yp = &yv[i, j, 0]
                for k in range(length):
                    yp[k] = (xp[k] - m) * s
    return y, r


def scaled_backward_channels(const floating[:, :, ::1] g, const floating[:, :, ::1] y,
                             const floating[::1] r, bint centred):
    """r * (g - mean(g) - y * mean(g * y)) per channel of (N, C, L) arrays (means over
    axes 0 and 2; without the mean(g) term when not `centred`): the gradient of the
    standardisation (or of the RMS scaling) from its output y and inverse std r (C,)."""
    cdef Py_ssize_t n = g.shape[0], c = g.shape[1], length = g.shape[2], i, j, k
    if y.shape[0] != n or y.shape[1] != c or y.shape[2] != length or r.shape[0] != c:
        raise ValueError("scaled_backward_channels: g, y and r do not match")
    dtype = np.float32 if floating is float else np.float64
    out = np.empty((n, c, length), dtype)
    if n * length == 0 or c == 0:
        return out
    cdef floating[:, :, ::1] ov = out
    sums = np.zeros((2, c), np.float64)
    cdef double[:, ::1] sv = sums
    cdef double count = <double>(n * length)
    cdef floating mg, mgy, s
    cdef const floating* gp
    cdef const floating* yp
    cdef floating* op
    with nogil:
        for i in range(n):
            for j in range(c):
                gp = &g[i, j, 0]
                yp = &y[i, j, 0]
                if centred:
                    sv[0, j] += _row_sum(gp, length)
                sv[1, j] += _row_dot(gp, yp, length)
        for i in range(n):
            for j in range(c):
                mg = <floating>(sv[0, j] / count)
                mgy = <floating>(sv[1, j] / count)
                s = r[j]
                gp = &g[i, j, 0]
                yp = &y[i, j, 0]
                op = &ov[i, j, 0]
                for k in range(length):
                    op[k] = ((gp[k] - mg) - yp[k] * mgy) * s
    return out


def channel_affine(const floating[:, :, ::1] y, const floating[::1] w, const floating[::1] b):
    """y * w + b per channel of y (N, C, L), w and b of shape (C,)."""
    cdef Py_ssize_t n = y.shape[0], c = y.shape[1], length = y.shape[2], i, j, k
    if w.shape[0] != c or b.shape[0] != c:
        raise ValueError("channel_affine: w and b must have one entry per channel")
    dtype = np.float32 if floating is float else np.float64
    out = np.empty((n, c, length), dtype)
    if n * length == 0 or c == 0:
        return out
    cdef floating[:, :, ::1] ov = out
    cdef floating wj, bj
    cdef const floating* yp
    cdef floating* op
    with nogil:
        for i in range(n):
            for j in range(c):
                wj = w[j]
                bj = b[j]
                yp = &y[i, j, 0]
                op = &ov[i, j, 0]
                for k in range(length):
                    op[k] = yp[k] * wj + bj
    return out


def channel_dot(const floating[:, :, ::1] a, const floating[:, :, ::1] b):
    """sum(a * b) over axes 0 and 2 of (N, C, L) arrays: shape (C,), a's dtype."""
    cdef Py_ssize_t n = a.shape[0], c = a.shape[1], length = a.shape[2], i, j
    if b.shape[0] != n or b.shape[1] != c or b.shape[2] != length:
        raise ValueError("channel_dot: a and b must have the same shape")
    acc = np.zeros(c, np.float64)
    cdef double[::1] av = acc
    if n * length > 0:
        with nogil:
            for i in range(n):
                for j in range(c):
                    av[j] += _row_dot(&a[i, j, 0], &b[i, j, 0], length)
    return acc.astype(np.float32 if floating is float else np.float64)


def channel_sum(const floating[:, :, ::1] a):
    """sum(a) over axes 0 and 2 of an (N, C, L) array: shape (C,), a's dtype."""
    cdef Py_ssize_t n = a.shape[0], c = a.shape[1], length = a.shape[2], i, j
    acc = np.zeros(c, np.float64)
    cdef double[::1] av = acc
    if n * length > 0:
        with nogil:
            for i in range(n):
                for j in range(c):
                    av[j] += _row_sum(&a[i, j, 0], length)
    return acc.astype(np.float32 if floating is float else np.float64)


# ---------------------------------------------------------------------------------------
# Max pooling over (P, H, W) planes (P = N*C; 1-d pooling is H = 1)
# ---------------------------------------------------------------------------------------

# The window argmax is C (_max_pool.h): Cython's `a if c else b` and `or` compile to
# branches on the data, which mispredict half the time on random values.
cdef extern from "_max_pool.h":
    int tg_max_pool_indices_f(const float* x, int64_t* out, Py_ssize_t planes,
                              Py_ssize_t height, Py_ssize_t width, int kh, int kw, int sh,
                              int sw, int ph, int pw, int dh, int dw, Py_ssize_t oh,
                              Py_ssize_t ow) noexcept nogil
    int tg_max_pool_indices_d(const double* x, int64_t* out, Py_ssize_t planes,
                              Py_ssize_t height, Py_ssize_t width, int kh, int kw, int sh,
                              int sw, int ph, int pw, int dh, int dw, Py_ssize_t oh,
                              Py_ssize_t ow) noexcept nogil


def max_pool2d_indices(const floating[:, :, ::1] x, int kh, int kw, int sh, int sw,
                       int ph, int pw, int dh, int dw, Py_ssize_t oh, Py_ssize_t ow):
    """The flat index ``ih * W + iw`` in its plane of each window's maximum, int64
    (P, oh, ow), for windows of kh x kw entries, stride (sh, sw), dilation (dh, dw),
    starting at (i * sh - ph, j * sw - pw): the first maximum in row-major window order,
    a NaN counting as the maximum (the first NaN wins), and only entries inside the input
    taking part (padding never wins: an all -inf window gives its first entry in the
    input). A window with no entry inside the input raises ValueError."""
    cdef Py_ssize_t planes = x.shape[0], height = x.shape[1], width = x.shape[2]
    cdef int empty
    idx = np.empty((planes, oh, ow), np.int64)
    if planes == 0 or oh <= 0 or ow <= 0 or height == 0 or width == 0:
        if planes and oh > 0 and ow > 0:
            raise ValueError("max pooling: a window has no entry inside the (empty) input")
        return idx
    cdef int64_t[:, :, ::1] iv = idx
    with nogil:
        if floating is float:
            empty = tg_max_pool_indices_f(&x[0, 0, 0], &iv[0, 0, 0], planes, height, width,
                                          kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
        else:
            empty = tg_max_pool_indices_d(&x[0, 0, 0], &iv[0, 0, 0], planes, height, width,
                                          kh, kw, sh, sw, ph, pw, dh, dw, oh, ow)
    if empty:
        raise ValueError("max pooling: a window has no entry inside the input (the "
                         "padding or dilation is too large for its size)")
    return idx


def pool_gather(const floating[:, ::1] x, const int64_t[:, ::1] idx):
    """out[p, m] = x[p, idx[p, m]] for x (P, plane) and idx (P, M): the pooled values.
    An index outside [0, plane) raises IndexError (as NumPy's fancy indexing)."""
    cdef Py_ssize_t planes = idx.shape[0], m = idx.shape[1], size = x.shape[1], p, k
    cdef int64_t t
    cdef bint bad = False
    if x.shape[0] != planes:
        raise ValueError("pool_gather: x and idx must have the same number of planes")
    dtype = np.float32 if floating is float else np.float64
    out = np.empty((planes, m), dtype)
    if planes == 0 or m == 0:
        return out
    cdef floating[:, ::1] ov = out
    with nogil:
        for p in range(planes):
            for k in range(m):
                t = idx[p, k]
                if t < 0 or t >= size:
                    bad = True
                    t = 0
                ov[p, k] = x[p, t]
    if bad:
        raise IndexError(f"pool_gather: an index is outside the plane of {size} entries")
    return out


def pool_scatter(const floating[:, ::1] g, const int64_t[:, ::1] idx, Py_ssize_t size):
    """zeros (P, size) with out[p, idx[p, m]] += g[p, m]: the adjoint of pool_gather
    (entries that several windows route to get the sum). An index outside [0, size)
    raises IndexError."""
    cdef Py_ssize_t planes = idx.shape[0], m = idx.shape[1], p, k
    cdef int64_t t
    cdef bint bad = False
    if g.shape[0] != planes or g.shape[1] != m:
        raise ValueError("pool_scatter: g and idx must have the same shape")
    dtype = np.float32 if floating is float else np.float64
    out = np.zeros((planes, size), dtype)
    if planes == 0 or m == 0 or size == 0:
        if planes and m and not size:
            raise IndexError("pool_scatter: indices into an empty plane")
        return out
    cdef floating[:, ::1] ov = out
    with nogil:
        for p in range(planes):
            for k in range(m):
                t = idx[p, k]
                if t < 0 or t >= size:
                    bad = True
                    continue
                ov[p, t] += g[p, k]
    if bad:
        raise IndexError(f"pool_scatter: an index is outside the plane of {size} entries")
    return out


# ---------------------------------------------------------------------------------------
# Convolution: col2im (the input gradient's scatter of window columns)
# ---------------------------------------------------------------------------------------

def col2im_add(const floating[:, ::1] cols, floating[:, :, :, ::1] acc, int kh, int kw,
               int sh, int sw, int ph, int pw, int dh, int dw, Py_ssize_t oh,
               Py_ssize_t ow):
    """acc[n, ih, iw, :] += cols[(n, i, j), (a, b, :)] for every window entry (a, b) of
    output position (i, j) that lands inside acc (ih = i*sh - ph + a*dh, iw likewise):
    the adjoint of im2col, channels last. cols is (N*oh*ow, kh*kw*C) with rows (n, i, j)
    and columns (a, b, c); acc is (N, H, W, C). Entries landing in the padding are
    dropped (they are the padding's gradient)."""
    cdef Py_ssize_t n = acc.shape[0], height = acc.shape[1], width = acc.shape[2]
    cdef Py_ssize_t c = acc.shape[3], s, i, j, a, b, ih, iw, k, row
    if cols.shape[0] != n * oh * ow or cols.shape[1] != kh * kw * c:
        raise ValueError("col2im_add: cols does not match acc and the window geometry")
    if n == 0 or c == 0 or oh <= 0 or ow <= 0:
        return
    cdef const floating* src
    cdef floating* dst
    with nogil:
        for s in range(n):
            for i in range(oh):
                for j in range(ow):
                    row = (s * oh + i) * ow + j
                    for a in range(kh):
                        ih = i * sh - ph + a * dh
                        if ih < 0 or ih >= height:
                            continue
                        for b in range(kw):
                            iw = j * sw - pw + b * dw
                            if iw < 0 or iw >= width:
                                continue
                            src = &cols[row, (a * kw + b) * c]
                            dst = &acc[s, ih, iw, 0]
                            for k in range(c):      # one contiguous run of C: vectorised
                                dst[k] += src[k]


def im2col(const floating[:, :, :, ::1] xp, floating[:, ::1] cols, int kh, int kw, int sh,
           int sw, int dh, int dw, Py_ssize_t oh, Py_ssize_t ow):
    """cols[(n, i, j), (a, b, :)] = xp[n, i*sh + a*dh, j*sw + b*dw, :]: the im2col matrix
    of a zero-padded channels-last xp (N, Hp, Wp, C), rows the output positions (n, i, j),
    columns the window entries (a, b, c); written into cols (N*oh*ow, kh*kw*C). Every
    window must lie inside xp (the caller padded it). At dilation 1 along W a window row
    is one contiguous run of kw*C entries: one memcpy."""
    cdef Py_ssize_t n = xp.shape[0], height = xp.shape[1], width = xp.shape[2]
    cdef Py_ssize_t c = xp.shape[3], s, i, j, a, b, row
    if cols.shape[0] != n * oh * ow or cols.shape[1] != kh * kw * c:
        raise ValueError("im2col: cols does not match xp and the window geometry")
    if n == 0 or c == 0 or oh <= 0 or ow <= 0:
        return
    if (oh - 1) * sh + (kh - 1) * dh >= height or (ow - 1) * sw + (kw - 1) * dw >= width:
        raise ValueError("im2col: a window reaches outside xp")
    cdef size_t run = c * sizeof(floating)
    cdef const floating* src
    cdef floating* dst
    with nogil:
        for s in range(n):
            for i in range(oh):
                for j in range(ow):
                    row = (s * oh + i) * ow + j
                    for a in range(kh):
                        src = &xp[s, i * sh + a * dh, j * sw, 0]
                        dst = &cols[row, a * kw * c]
                        if dw == 1:
                            memcpy(dst, src, kw * run)
                        else:
                            for b in range(kw):
                                memcpy(dst + b * c, src + b * dw * c, run)


# ---------------------------------------------------------------------------------------
# Cross-entropy with class labels (issue 16: W2's loss took ~15 NumPy calls per step)
# ---------------------------------------------------------------------------------------


def cross_entropy_rows(const floating[:, ::1] x, const int64_t[::1] t):
    """(picked, probs) for logits x (N, C) and labels t (N,): picked[i] =
    log_softmax(x)[i, t[i]] and probs = softmax(x), from one exp per element, or None
    when the caller must take its general path: a label outside [0, C) (which raises
    there) or a logit that is not finite (whose NaN/inf semantics NumPy's path keeps).

    As NumPy's path computes it: z = x - max(row), e = exp(z), s = sum(e),
    log_softmax = z - log(s), softmax = e / s; z, e, log and the divisions in the data's
    type, the row sum accumulated in double (NOTE: [accuracy]) and rounded once. The
    exponentials are NumPy's own ``np.exp`` loop, run once in place over the shifted
    logits (NOTE: not libm's scalar expf: 29 instructions an element against NumPy's
    SIMD loop's ~2, and NumPy's values, so the same bits as NumPy's exp); the log is
    libm's (one a row), so a float32 loss can differ from NumPy's by an ulp."""
    cdef Py_ssize_t n = x.shape[0], c = x.shape[1], i, j
    cdef floating m, z, s_f, lse
    cdef double s
    cdef int64_t k
    cdef bint bad = False
    if t.shape[0] != n or c == 0:
        return None
    dtype = np.float32 if floating is float else np.float64
    probs = np.empty((n, c), dtype)
    picked = np.empty(n, dtype)
    cdef floating[:, ::1] pv = probs
    cdef floating[::1] kv = picked
    with nogil:
        for i in range(n):
            k = t[i]
            if k < 0 or k >= c:
                bad = True
                break
            m = x[i, 0]
            for j in range(c):
                z = x[i, j]
                if not (z - z == 0):         # inf or NaN
                    bad = True
                    break
                if z > m:
                    m = z
            if bad:
                break
            kv[i] = x[i, k] - m              # the picked shifted logit; log(s) comes off below
            for j in range(c):
                pv[i, j] = x[i, j] - m
    if bad:
        return None
    _exp(probs, probs)
    with nogil:
        for i in range(n):
            s = 0
            for j in range(c):
                s += pv[i, j]
            s_f = <floating>s
            if floating is float:
                lse = logf(s_f)
            else:
                lse = log(s_f)
            kv[i] = kv[i] - lse
            for j in range(c):
                pv[i, j] = pv[i, j] / s_f
    return picked, probs


_exp = np.exp       # looked up once: the kernel calls it with out positional


def minus_one_hot_rows(const floating[:, ::1] p, const int64_t[::1] t):
    """A copy of p (N, C) with 1 subtracted at [i, t[i]], or None when a label is outside
    [0, C) (the caller's general path raises). The same IEEE subtraction as NumPy's
    ``rows[i, t] -= 1``, so the same bits."""
    cdef Py_ssize_t n = p.shape[0], c = p.shape[1], i
    cdef int64_t k
    if t.shape[0] != n:
        return None
    dtype = np.float32 if floating is float else np.float64
    out = np.empty((n, c), dtype)
    cdef floating[:, ::1] ov = out
    cdef floating one = 1
    cdef bint bad = False
    with nogil:
        for i in range(n):
            k = t[i]
            if k < 0 or k >= c:
                bad = True
    if bad:
        return None
    with nogil:
        if n * c:
            memcpy(&ov[0, 0], &p[0, 0], n * c * sizeof(floating))
        for i in range(n):
            ov[i, t[i]] = ov[i, t[i]] - one
    return out
