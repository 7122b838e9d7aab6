// The per-backend prelude put in front of every kernel source: warp size,
// 64-bit integer names, fp16 / bf16 storage types and conversions, warp
// shuffles, the tensor-core MMA (CUDA). The embedding defines
// CONVTUNE_BACKEND_CUDA or CONVTUNE_BACKEND_HIP before this text. It includes
// no header, so the run-time compilers need no include path on the machine
// that compiles.
//
// Kernels are `CT_KERNEL void name(T* buf0, ..., ct_i64 scalar0, ...)`: the
// step's buffers as pointers, then its scalars as 64-bit integers, in order.
#ifndef CONVTUNE_PRELUDE_CUH_
#define CONVTUNE_PRELUDE_CUH_

#if !defined(CONVTUNE_BACKEND_CUDA) && !defined(CONVTUNE_BACKEND_HIP)
#error "define CONVTUNE_BACKEND_CUDA or CONVTUNE_BACKEND_HIP before the prelude"
#endif

#define CT_KERNEL extern "C" __global__
#define CT_DEVICE __device__ __forceinline__
// A kernel's dynamic shared memory, `type name[]`. Defined beforehand where
// the kernels run on host lanes (tests/server/host_lanes.h).
#ifndef CT_EXTERN_SHARED
#define CT_EXTERN_SHARED(type, name) extern __shared__ type name[]
#endif

typedef long long ct_i64;
typedef unsigned long long ct_u64;
typedef int ct_i32;
typedef unsigned int ct_u32;
typedef unsigned short ct_u16;

// 16 bytes moved as one access.
struct alignas(16) ct_v16 {
  ct_u32 w[4];
};

#if defined(CONVTUNE_BACKEND_CUDA)
#define CT_WARP_SIZE 32
#elif defined(__AMDGCN_WAVEFRONT_SIZE)
#define CT_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define CT_WARP_SIZE 64
#endif

// Half and bfloat16 as 16-bit storage; arithmetic happens in float.
struct alignas(2) ct_half {
  ct_u16 bits;
};
struct alignas(2) ct_bf16 {
  ct_u16 bits;
};

CT_DEVICE float ct_bits_to_float(ct_u32 u) { return __uint_as_float(u); }
CT_DEVICE ct_u32 ct_float_to_bits(float f) { return __float_as_uint(f); }

#if defined(CONVTUNE_BACKEND_CUDA)
CT_DEVICE float ct_half_to_float(ct_half h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
}
CT_DEVICE ct_half ct_float_to_half(float f) {
  ct_half h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
  return h;
}
#else
CT_DEVICE float ct_half_to_float(ct_half h) {
  return static_cast<float>(__builtin_bit_cast(_Float16, h.bits));
}
CT_DEVICE ct_half ct_float_to_half(float f) {
  ct_half h;
  h.bits = __builtin_bit_cast(ct_u16, static_cast<_Float16>(f));
  return h;
}
#endif

CT_DEVICE float ct_bf16_to_float(ct_bf16 b) {
  return ct_bits_to_float(static_cast<ct_u32>(b.bits) << 16);
}
// Round to nearest even; NaN stays a (quiet) NaN. Compute capability 8.0
// on converts in one instruction; elsewhere the rounding is spelled out.
#if defined(CONVTUNE_BACKEND_CUDA) && defined(__CUDA_ARCH__) && \
    __CUDA_ARCH__ >= 800
CT_DEVICE ct_bf16 ct_float_to_bf16(float f) {
  ct_bf16 b;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(b.bits) : "f"(f));
  return b;
}
#else
CT_DEVICE ct_bf16 ct_float_to_bf16(float f) {
  const ct_u32 u = ct_float_to_bits(f);
  ct_bf16 b;
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    b.bits = static_cast<ct_u16>((u >> 16) | 0x40u);
  } else {
    b.bits = static_cast<ct_u16>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }
  return b;
}
#endif

// Overloads so one kernel body can load and store any of the three types.
CT_DEVICE float ct_to_float(float v) { return v; }
CT_DEVICE float ct_to_float(ct_half v) { return ct_half_to_float(v); }
CT_DEVICE float ct_to_float(ct_bf16 v) { return ct_bf16_to_float(v); }
template <typename T>
CT_DEVICE T ct_from_float(float v);
template <>
CT_DEVICE float ct_from_float<float>(float v) {
  return v;
}
template <>
CT_DEVICE ct_half ct_from_float<ct_half>(float v) {
  return ct_float_to_half(v);
}
template <>
CT_DEVICE ct_bf16 ct_from_float<ct_bf16>(float v) {
  return ct_float_to_bf16(v);
}

// Warp shuffles over the whole warp (HIP has no mask argument).
#if defined(CONVTUNE_BACKEND_CUDA)
CT_DEVICE float ct_shfl_down(float v, int delta) {
  return __shfl_down_sync(0xffffffffu, v, delta);
}
CT_DEVICE float ct_shfl_xor(float v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
CT_DEVICE float ct_shfl(float v, int lane) {
  return __shfl_sync(0xffffffffu, v, lane);
}
#else
CT_DEVICE float ct_shfl_down(float v, int delta) {
  return __shfl_down(v, delta);
}
CT_DEVICE float ct_shfl_xor(float v, int mask) { return __shfl_xor(v, mask); }
CT_DEVICE float ct_shfl(float v, int lane) { return __shfl(v, lane); }
#endif

// Sum over the warp; every lane gets the total.
CT_DEVICE float ct_warp_sum(float v) {
  for (int m = CT_WARP_SIZE / 2; m > 0; m /= 2) v += ct_shfl_xor(v, m);
  return v;
}

// The flat index of this thread in a 1-D launch, as 64-bit.
CT_DEVICE ct_i64 ct_global_index_x() {
  return static_cast<ct_i64>(blockIdx.x) * blockDim.x + threadIdx.x;
}

// What every conv kernel shares: the options it is compiled with (defaults
// so that a source compiles on its own): -DCT_TYPE (1 fp32, 2 fp16, 3 bf16),
// -DCT_DIR (1 F, 2 B, 3 W), -DCT_NHWC (0 or 1); its element type; tensor
// strides; the sum of split partials; and its leading problem scalars, in
// plan_args order.
#ifndef CT_TYPE
#define CT_TYPE 1
#endif
#ifndef CT_DIR
#define CT_DIR 1
#endif
#ifndef CT_NHWC
#define CT_NHWC 0
#endif
#if CT_TYPE == 1
typedef float ct_t;
#elif CT_TYPE == 2
typedef ct_half ct_t;
#else
typedef ct_bf16 ct_t;
#endif

#if defined(CONVTUNE_BACKEND_CUDA)
// d += a b on the tensor cores (sm_80+): one m16n8k16 MMA of the 16-bit
// tensor type (bf16 for CT_TYPE 3, else fp16) with fp32 sums, fragments in
// mma.sync's register layout.
CT_DEVICE void ct_mma_16816(float* d, const ct_u32* a, const ct_u32* b) {
#if CT_TYPE == 3
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
      "{%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
#endif

// Strides in (outer, channel, D, H, W) order of a tensor with `inner`
// channels and spatial size sp (D, H, W), for the compiled layout: the
// activations (inner = all channels) and the filter (inner = channels per
// group, outer = output channel).
template <typename I>
CT_DEVICE void ct_strides(I* s, I inner, const I* sp) {
#if CT_NHWC
  s[0] = sp[0] * sp[1] * sp[2] * inner, s[1] = 1, s[2] = sp[1] * sp[2] * inner;
  s[3] = sp[2] * inner, s[4] = inner;
#else
  s[0] = inner * sp[0] * sp[1] * sp[2], s[1] = sp[0] * sp[1] * sp[2],
  s[2] = sp[1] * sp[2];
  s[3] = sp[2], s[4] = 1;
#endif
}

// dst[i] = the sum over s < slices of src[s * count + i] (fp32 partial sums
// in the workspace), in the tensor type. The body of the kernels that finish
// split reductions. A block takes 32 consecutive elements at a time (grid-
// stride); its rows of 32 threads (blockDim.x a multiple of 32, at most
// 1024) split the slices, row r summing slices r, r + rows, ... in order,
// and the rows' sums are added in row order: the same sum for the same
// launch, with every row's loads in flight at once where the slices are
// many and the elements few. A row issues four of its loads before it adds
// them (in order).
CT_DEVICE void ct_sum_slices(const float* src, ct_t* dst, ct_i64 count,
                             ct_i64 slices) {
  __shared__ float rows_sum[32][33];
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int row = static_cast<int>(threadIdx.x / 32);
  const int rows = static_cast<int>(blockDim.x / 32);
  for (ct_i64 base = static_cast<ct_i64>(blockIdx.x) * 32; base < count;
       base += static_cast<ct_i64>(gridDim.x) * 32) {
    const ct_i64 i = base + lane;
    float sum = 0.0f;
    if (i < count) {
      const float* p = src + row * count + i;
      const ct_i64 step = rows * count;
      ct_i64 s = row;
      for (; s + 3 * rows < slices; s += 4 * rows, p += 4 * step) {
        const float a = p[0], b = p[step], c = p[2 * step], d = p[3 * step];
        sum += a;
        sum += b;
        sum += c;
        sum += d;
      }
      for (; s < slices; s += rows, p += step) sum += *p;
    }
    rows_sum[row][lane] = sum;
    __syncthreads();
    if (row == 0 && i < count) {
      float total = 0.0f;
      for (int r = 0; r < rows; ++r) total += rows_sum[r][lane];
      dst[i] = ct_from_float<ct_t>(total);
    }
    __syncthreads();
  }
}

#define CT_PROBLEM_PARAMS                                                      \
  ct_i64 a_dims, ct_i64 a_n, ct_i64 a_c, ct_i64 a_k, ct_i64 a_id, ct_i64 a_ih, \
      ct_i64 a_iw, ct_i64 a_fd, ct_i64 a_fh, ct_i64 a_fw, ct_i64 a_pd,         \
      ct_i64 a_ph, ct_i64 a_pw, ct_i64 a_sd, ct_i64 a_sh, ct_i64 a_sw,         \
      ct_i64 a_dd, ct_i64 a_dh, ct_i64 a_dw, ct_i64 a_g, ct_i64 a_layout,      \
      ct_i64 a_type, ct_i64 a_dir

#endif  // CONVTUNE_PRELUDE_CUH_
