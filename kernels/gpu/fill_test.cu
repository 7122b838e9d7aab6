// Small kernels the runtime tests launch: a fill, a fp16/bf16 round trip and
// a deliberate fault (a write through a null pointer).

CT_KERNEL void fill_i64(float* out, ct_i64 n, ct_i64 value) {
  const ct_i64 i = ct_global_index_x();
  if (i < n) out[i] = static_cast<float>(value) + static_cast<float>(i);
}

// out[i] = float(half(in[i])) and out[n + i] = float(bf16(in[i])).
CT_KERNEL void round_trip_16(const float* in, float* out, ct_i64 n) {
  const ct_i64 i = ct_global_index_x();
  if (i < n) {
    out[i] = ct_to_float(ct_from_float<ct_half>(in[i]));
    out[n + i] = ct_to_float(ct_from_float<ct_bf16>(in[i]));
  }
}

CT_KERNEL void fault_null_write(float* out, ct_i64 n) {
  float* volatile null_out = nullptr;
  const ct_i64 i = ct_global_index_x();
  if (i < n) null_out[i] = out[i];
}
