/* The CUDA emulator's stand-in for CUB's DeviceRadixSort (tests/emu): the
 * pair sorts the backend calls, with CUB's contract: a NULL temp pointer
 * only reports temp_storage_bytes; keys compare by their bits in
 * [begin_bit, end_bit) after CUB's float twiddle (so -0.0 sorts below +0.0
 * and NaNs by their bits); the sort is stable, descending too; too little
 * temp storage is an error. The work is submitted to the stream like a
 * kernel (emu_runtime.cc), so it is recorded when the stream is captured. */
#ifndef MR_EMU_CUB_DEVICE_RADIX_SORT_CUH
#define MR_EMU_CUB_DEVICE_RADIX_SORT_CUH

#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include <cuda_runtime.h>

/* emu_runtime.cc: checks that [p, p + bytes) is device memory; runs fn now
 * or records it while the stream is captured. */
cudaError_t emu_check_device_range(const void *p, size_t bytes, const char *what);
struct emu_body;
cudaError_t emu_submit_host_work(cudaStream_t s, const char *name, emu_body *work);

namespace cub {

template <typename K> static inline uint64_t emu_radix_bits(K k)
{
    if constexpr (std::is_same<K, float>::value) {
        uint32_t u;
        memcpy(&u, &k, 4);
        return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    } else {
        return (uint64_t)k;
    }
}

template <typename K, typename V> struct emu_sort_work : emu_body {
    const K *keys_in;
    K *keys_out;
    const V *values_in;
    V *values_out;
    int n, begin_bit, end_bit, descending;
    void run() override
    {
        std::vector<int> idx(n);
        std::iota(idx.begin(), idx.end(), 0);
        const int width = end_bit - begin_bit;
        const uint64_t mask = width >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << width) - 1);
        std::vector<uint64_t> bits(n);
        for (int i = 0; i < n; i++) bits[i] = (emu_radix_bits(keys_in[i]) >> begin_bit) & mask;
        std::stable_sort(idx.begin(), idx.end(),
                         [&](int a, int b) { return descending ? bits[a] > bits[b] : bits[a] < bits[b]; });
        std::vector<K> k(n);
        std::vector<V> v(n);
        for (int i = 0; i < n; i++) k[i] = keys_in[idx[i]], v[i] = values_in[idx[i]];
        std::copy(k.begin(), k.end(), keys_out);
        std::copy(v.begin(), v.end(), values_out);
    }
};

struct DeviceRadixSort {
    /* what CUB would ask for, near enough: one spare copy of keys and values */
    template <typename K, typename V> static size_t emu_temp_bytes(int n)
    {
        return 256 + (size_t)(n > 0 ? n : 0) * (sizeof(K) + sizeof(V));
    }

    template <typename K, typename V>
    static cudaError_t emu_sort(void *temp, size_t &temp_bytes, const K *ki, K *ko, const V *vi, V *vo, int n,
                                int begin_bit, int end_bit, cudaStream_t s, int descending)
    {
        if (!temp) {
            temp_bytes = emu_temp_bytes<K, V>(n);
            return cudaSuccess;
        }
        if (temp_bytes < emu_temp_bytes<K, V>(n) || n < 0 || begin_bit < 0 || end_bit > (int)(8 * sizeof(K)) ||
            begin_bit >= end_bit)
            return cudaErrorInvalidValue;
        if (n == 0) return cudaSuccess;
        cudaError_t e = emu_check_device_range(temp, temp_bytes, "cub temp storage");
        if (e == cudaSuccess) e = emu_check_device_range(ki, sizeof(K) * (size_t)n, "cub keys in");
        if (e == cudaSuccess) e = emu_check_device_range(ko, sizeof(K) * (size_t)n, "cub keys out");
        if (e == cudaSuccess) e = emu_check_device_range(vi, sizeof(V) * (size_t)n, "cub values in");
        if (e == cudaSuccess) e = emu_check_device_range(vo, sizeof(V) * (size_t)n, "cub values out");
        if (e != cudaSuccess) return e;
        auto *w = new emu_sort_work<K, V>();
        w->keys_in = ki, w->keys_out = ko, w->values_in = vi, w->values_out = vo;
        w->n = n, w->begin_bit = begin_bit, w->end_bit = end_bit, w->descending = descending;
        return emu_submit_host_work(s, "cub::DeviceRadixSort", w);
    }

    template <typename K, typename V>
    static cudaError_t SortPairs(void *temp, size_t &temp_bytes, const K *ki, K *ko, const V *vi, V *vo, int n,
                                 int begin_bit = 0, int end_bit = sizeof(K) * 8, cudaStream_t s = 0)
    {
        return emu_sort(temp, temp_bytes, ki, ko, vi, vo, n, begin_bit, end_bit, s, 0);
    }

    template <typename K, typename V>
    static cudaError_t SortPairsDescending(void *temp, size_t &temp_bytes, const K *ki, K *ko, const V *vi, V *vo,
                                           int n, int begin_bit = 0, int end_bit = sizeof(K) * 8, cudaStream_t s = 0)
    {
        return emu_sort(temp, temp_bytes, ki, ko, vi, vo, n, begin_bit, end_bit, s, 1);
    }
};

} // namespace cub

#endif
