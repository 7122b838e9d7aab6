// Small kernels the runtime tests launch: a fill, a fp16/bf16 round trip and
// deliberate faults (a write through a null pointer, a kernel that never
// returns).

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

// Never returns: a kernel that hangs, for the measurement worker's time
// bound. The volatile counter keeps the loop from being removed.
CT_KERNEL void spin_forever(float* out, ct_i64 n) {
  volatile unsigned long long spins = 0;
  for (;;) spins = spins + 1;
}
