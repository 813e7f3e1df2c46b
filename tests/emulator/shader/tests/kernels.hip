// SPDX-License-Identifier: GPL-2.0-only
// Whole kernels the shader core's tests run (test_kernels.cpp), compiled
// at build time for gfx908 and gfx90a by Debian's clang-15 (HIP). Products
// are explicit fmaf, so that the CPU reference does not depend on which
// multiply-adds the compiler contracts.
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>

extern "C" __global__ void saxpy(float a, const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = fmaf(a, x[i], y[i]);
}

// A tree reduction of 256 floats per workgroup in LDS, with barriers.
extern "C" __global__ void reduce(const float *in, float *out, int n)
{
	__shared__ float s[256];
	int t = threadIdx.x, i = blockIdx.x * 256 + t;
	s[t] = i < n ? in[i] : 0.0f;
	__syncthreads();
	for (int k = 128; k > 0; k >>= 1) {
		if (t < k)
			s[t] += s[t + k];
		__syncthreads();
	}
	if (t == 0)
		out[blockIdx.x] = s[0];
}

// C = A * B for n x n matrices, n a multiple of 16, in 16x16 LDS tiles.
#define TILE 16
extern "C" __global__ void matmul(const float *A, const float *B, float *C, int n)
{
	__shared__ float a[TILE][TILE], b[TILE][TILE];
	int r = blockIdx.y * TILE + threadIdx.y, c = blockIdx.x * TILE + threadIdx.x;
	float acc = 0;
	for (int k = 0; k < n; k += TILE) {
		a[threadIdx.y][threadIdx.x] = A[r * n + k + threadIdx.x];
		b[threadIdx.y][threadIdx.x] = B[(k + threadIdx.y) * n + c];
		__syncthreads();
		for (int j = 0; j < TILE; j++)
			acc = fmaf(a[threadIdx.y][j], b[j][threadIdx.x], acc);
		__syncthreads();
	}
	C[r * n + c] = acc;
}

extern "C" __global__ void atomics(const int *in, int *hist, unsigned *sum, int *mx, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) {
		atomicAdd(&hist[in[i] & 15], 1);
		atomicAdd(sum, (unsigned)in[i]);
		atomicMax(mx, in[i]);
	}
}

// A private array indexed at run time (scratch), f64 division and
// integer division.
extern "C" __global__ void private_array(const double *in, double *out, int n)
{
	double v[24];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	for (int k = 0; k < 24; k++)
		v[k] = in[(i + k) % n] * (k + 1);
	double s = 0;
	for (int k = 0; k < 24; k++)
		s += v[(k * 7 + i) % 24] / (k + 3.0);
	out[i] = s;
}

// Values parked in AccVGPRs (v_accvgpr_write/read, as compiled code keeps
// MFMA accumulators and, on gfx908, spilled VGPRs; v_accvgpr_mov_b32 on
// gfx90a) across a loop of `rounds`: `keep` stays in an AGPR the whole
// time, `h` goes through one every round.
extern "C" __global__ void agpr_carry(const unsigned *in, unsigned *out, int n, int rounds)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	unsigned x = in[i], keep, h, t;
	asm volatile("v_accvgpr_write_b32 %0, %1" : "=a"(keep) : "v"(x ^ 0x5bd1e995u));
	asm volatile("v_accvgpr_write_b32 %0, %1" : "=a"(h) : "v"(x));
	for (int r = 0; r < rounds; r++) {
		asm volatile("v_accvgpr_read_b32 %0, %1" : "=v"(t) : "a"(h));
		t = t * 0x19660du + 0x3c6ef35fu + r;
#if defined(__gfx90a__)
		unsigned u;
		asm volatile("v_accvgpr_write_b32 %0, %1" : "=a"(u) : "v"(t));
		asm volatile("v_accvgpr_mov_b32 %0, %1" : "=a"(h) : "a"(u));
#else
		asm volatile("v_accvgpr_write_b32 %0, %1" : "=a"(h) : "v"(t));
#endif
	}
	asm volatile("v_accvgpr_read_b32 %0, %1" : "=v"(t) : "a"(h));
	asm volatile("v_accvgpr_read_b32 %0, %1" : "=v"(x) : "a"(keep));
	out[i] = t ^ x;
}

// Byte and 16-bit arithmetic as hipcc compiles it for GFX9: SDWA forms
// (a byte of a register as an operand) and the 16-bit ALU
// (v_mad_legacy_u16, v_ashrrev_i16).
extern "C" __global__ void narrow(const unsigned *in, unsigned *out, const unsigned char *b, unsigned char *bo,
				  const short *h, short *ho, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	out[i] = (in[i] % 256) * 3 + (unsigned char)(in[i] >> 8) + (unsigned short)(in[i] >> 3);
	bo[i] = (unsigned char)(b[i] * 7 + b[(i + 1) % n]);
	ho[i] = (short)(h[i] * h[i] - 3) >> 1;
}

// Half precision (hip_fp16.h): a sum, a product and a fused multiply-add,
// each stored, so that none is contracted into another.
extern "C" __global__ void halves(const __half *a, const __half *b, const __half *c, __half *s, __half *p, __half *f,
				  int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	s[i] = __hadd(a[i], b[i]);
	p[i] = __hmul(a[i], b[i]);
	f[i] = __hfma(a[i], b[i], c[i]);
}

// Workgroup 0 waits for a flag workgroup 1 sets: finishes only when
// several workgroups of a dispatch are in flight at once.
extern "C" __global__ void handshake(int *flag, int *out)
{
	if (threadIdx.x != 0)
		return;
	if (blockIdx.x == 0) {
		while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0) {
		}
		out[0] = 1;
	} else if (blockIdx.x == 1) {
		__atomic_store_n(flag, 1, __ATOMIC_RELEASE);
		out[1] = 2;
	}
}

// Cross-lane moves as hipcc emits them for the DPP and swizzle builtins:
// 16 results per work-item (out[16 * i + k]) from each wave's values v.
// DPP: v_mov_b32_dpp with each kind of control, row and bank masks with
// and without bound_ctrl, the old value kept where a lane does not write,
// v_add_u32_dpp / v_sub_f32_dpp (the compiler folds a move into the
// add), a move whose source lanes are partly inactive (odd v skip it);
// ds_swizzle_b32 in quad, swap, reverse, broadcast and bitmask modes.
extern "C" __global__ void lanes(const int *in, int *out)
{
	const int i = blockIdx.x * blockDim.x + threadIdx.x;
	const int v = in[i];
	int *o = out + 16 * i;
	o[0] = __builtin_amdgcn_update_dpp(0, v, 0x111, 0xf, 0xf, false);   // row_shr:1
	o[1] = __builtin_amdgcn_update_dpp(7, v, 0x142, 0xa, 0xf, false);   // row_bcast:15, rows 1 and 3
	o[2] = __builtin_amdgcn_mov_dpp(v, 0x1b, 0xf, 0xf, true);           // quad_perm:[3,2,1,0]
	o[3] = __builtin_amdgcn_update_dpp(0, v, 0x138, 0xf, 0xf, true);    // wave_shr:1
	o[4] = __builtin_amdgcn_update_dpp(5, v, 0x143, 0xc, 0xf, false);   // row_bcast:31, rows 2 and 3
	o[5] = __builtin_amdgcn_update_dpp(3, v, 0x101, 0xf, 0x5, true);    // row_shl:1, banks 0 and 2
	o[6] = __builtin_amdgcn_update_dpp(0, v, 0x134, 0xf, 0xf, false);   // wave_rol:1
	o[7] = __builtin_amdgcn_update_dpp(0, v, 0x123, 0xf, 0xf, false);   // row_ror:3
	o[8] = __builtin_amdgcn_update_dpp(0, v, 0x140, 0xf, 0xf, false);   // row_mirror
	o[9] = __builtin_amdgcn_update_dpp(0, v, 0x141, 0xf, 0xf, false);   // row_half_mirror
	o[10] = v + __builtin_amdgcn_update_dpp(0, v, 0x112, 0xf, 0xf, true);  // v_add_u32_dpp row_shr:2
	const float f = __int_as_float((v & 0x807fffff) | 0x3f800000);
	o[11] = __float_as_int(f - __int_as_float(__builtin_amdgcn_update_dpp(0, __float_as_int(f), 0x13c, 0xf, 0xf, true)));
	int odd = 9;
	if (v & 1)
		odd = __builtin_amdgcn_update_dpp(9, v, 0x130, 0xf, 0xf, false);  // wave_shl:1, sources maybe inactive
	o[12] = odd;
	o[13] = __builtin_amdgcn_ds_swizzle(v, 0x801b) ^ __builtin_amdgcn_ds_swizzle(v, 0x041f);  // QUAD_PERM, SWAP 1
	o[14] = __builtin_amdgcn_ds_swizzle(v, 0x1c1f) + __builtin_amdgcn_ds_swizzle(v, 0x00b8); // REVERSE 8, BROADCAST 8,5
	o[15] = __builtin_amdgcn_ds_swizzle(v, 0x0c35);  // BITMASK_PERM
}

// Half-precision math as hip_fp16.h compiles it for GFX9: hsqrt, hrsqrt,
// hexp2, hlog2 (v_sqrt/rsq/exp/log_f16) and the roundings, 8 results per
// element.
extern "C" __global__ void half_math(const __half *a, __half *o, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	o[8 * i + 0] = hsqrt(a[i]);
	o[8 * i + 1] = hrsqrt(a[i]);
	o[8 * i + 2] = hexp2(a[i]);
	o[8 * i + 3] = hlog2(a[i]);
	o[8 * i + 4] = hfloor(a[i]);
	o[8 * i + 5] = hceil(a[i]);
	o[8 * i + 6] = htrunc(a[i]);
	o[8 * i + 7] = hrint(a[i]);
}
