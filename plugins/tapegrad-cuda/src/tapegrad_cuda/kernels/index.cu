// tapegrad-cuda: NumPy indexing on the device (getitem, its scatter-add gradient, setitem).
//
// kernels.py resolves an index into: an output of shape meta[0:ndim] (the shape x[index]
// has), element strides meta[ndim:2*ndim] of the sliced view of the base array for the
// axes that basic indexing keeps (0 for the axes an advanced index contributes), and
// `nidx` advanced (integer array) indices, each as 3 + ndim entries:
//     pointer (a const long long* on the device, stored as a long long), length of the
//     axis it indexes, element stride of that axis, its strides over the output axes.
// The element of the base array that output element i maps to is then
//     off(i) = sum_d coord_d * strides[d] + sum_k wrap(idx_k[sum_d coord_d * istr_k[d]]) * stride_k
// where wrap adds the axis length to a negative index (bounds are checked before launch).
//
//   tg_gather_<t>(const T* x, T* out, long long n, int ndim, int nidx, const long long* meta)
//       out[i] = x[off(i)]                        (out contiguous)
//   tg_scatter_<t>(const T* v, T* x, long long n, int ndim, int nidx, const long long* meta)
//       x[off(i)] = v[i]         (setitem; where an index repeats, one of the writes wins)
//   tg_scatter_add_<t>(const T* v, T* x, long long n, int ndim, int nidx, const long long* meta)
//       x[off(i)] += v[i] atomically (the gradient of getitem: repeats accumulate)
#include "common.cuh"

__device__ __forceinline__ long long tg_index_offset(long long i, int ndim, int nidx,
                                                     const long long* __restrict__ meta) {
    const long long* shape = meta;
    const long long* strides = meta + ndim;
    long long off = 0, rest = i;
    // coordinates are needed for every index array, so compute them once per output axis
    long long iofs[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    const int k_max = nidx < 8 ? nidx : 8;
    for (int d = ndim - 1; d >= 0; --d) {
        const long long c = rest % shape[d];
        rest /= shape[d];
        off += c * strides[d];
        for (int k = 0; k < k_max; ++k) iofs[k] += c * meta[2 * ndim + k * (3 + ndim) + 3 + d];
    }
    for (int k = 0; k < k_max; ++k) {
        const long long* ent = meta + 2 * ndim + k * (3 + ndim);
        const long long* idx = (const long long*)ent[0];
        long long j = idx[iofs[k]];
        if (j < 0) j += ent[1];
        off += j * ent[2];
    }
    return off;
}

#define TG_INDEX(T, sfx)                                                                   \
    extern "C" __global__ void tg_gather_##sfx(const T* __restrict__ x, T* __restrict__ out, \
                                               long long n, int ndim, int nidx,            \
                                               const long long* __restrict__ meta) {       \
        TG_GRID_LOOP(i, n) { out[i] = x[tg_index_offset(i, ndim, nidx, meta)]; }           \
    }                                                                                      \
    extern "C" __global__ void tg_scatter_##sfx(const T* __restrict__ v, T* x, long long n, \
                                                int ndim, int nidx,                        \
                                                const long long* __restrict__ meta) {      \
        TG_GRID_LOOP(i, n) { x[tg_index_offset(i, ndim, nidx, meta)] = v[i]; }             \
    }

#define TG_SCATTER_ADD(T, sfx)                                                             \
    extern "C" __global__ void tg_scatter_add_##sfx(const T* __restrict__ v, T* x,          \
                                                    long long n, int ndim, int nidx,       \
                                                    const long long* __restrict__ meta) {  \
        TG_GRID_LOOP(i, n) { atomicAdd(x + tg_index_offset(i, ndim, nidx, meta), v[i]); }  \
    }

TG_INDEX(float, f32)
TG_INDEX(double, f64)
TG_INDEX(int, i32)
TG_INDEX(long long, i64)
TG_INDEX(bool, b8)
TG_SCATTER_ADD(float, f32)
TG_SCATTER_ADD(double, f64)
