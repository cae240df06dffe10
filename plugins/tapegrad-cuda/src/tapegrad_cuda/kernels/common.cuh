// tapegrad-cuda: helpers shared by every .cu file (textually included by kernels.py when
// it builds a module, so each .cu file also compiles on its own with nvcc -I).
#pragma once

#define TG_GRID_LOOP(i, n) \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (long long)blockDim.x * gridDim.x)

// Every block-wide reduction assumes exactly this many threads per block (kernels.py
// launches them with THREADS = 256).
#define TG_THREADS 256

// Scalar helpers that also compile for the host (math.cuh; tested there with nvcc).
#define TG_HD __host__ __device__ __forceinline__

// Element offset of flat (C-order) index i of an array with `shape`, read through
// `strides` (in elements; 0 on broadcast axes, negative for reversed views).
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
