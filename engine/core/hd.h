/* MR_HD marks the per-element math that both backends share: it is
 * `__host__ __device__` when compiled by nvcc and nothing in plain C, so the
 * CPU tests exercise the exact arithmetic the GPU kernels run. */
#ifndef MR_HD_H
#define MR_HD_H

#ifdef __CUDACC__
#define MR_HD __host__ __device__
#else
#define MR_HD
#endif

#endif
