// SPDX-License-Identifier: GPL-2.0-only
//
// Kernels compiled by Debian's hipcc, each result compared with the same
// math on the CPU:
//   saxpy     element-wise y = a*x + y over a size that is not a multiple
//             of the block (the tail is masked), bit-exact (one fma per
//             element on both sides);
//   reduce    a sum of integers per block in LDS with __syncthreads, then
//             the blocks' partial sums (exact in integers);
//   matmul    a tiled matrix multiply through shared memory, each product
//             accumulated in the same order as the CPU's loop (bit-exact);
//   atomics   atomicAdd on int and float (float: small integers, so the sum
//             is exact in any order), atomicCAS as a spin-free "first
//             writer wins" and a CAS-loop increment.
//   hip_kernels [--list] [--case NAME]...
#include "hiptest.h"

#include <cmath>

namespace {

using hiptest::step;

template <typename T> struct DeviceBuffer {
	T *p = nullptr;
	size_t n = 0;
	explicit DeviceBuffer(size_t count) : n(count) { HIPTEST_CHECK(hipMalloc(&p, n * sizeof(T))); }
	~DeviceBuffer() { (void)hipFree(p); }
	DeviceBuffer(const DeviceBuffer &) = delete;
	DeviceBuffer &operator=(const DeviceBuffer &) = delete;
	void upload(const std::vector<T> &v) { HIPTEST_CHECK(hipMemcpy(p, v.data(), n * sizeof(T), hipMemcpyHostToDevice)); }
	std::vector<T> download() const
	{
		std::vector<T> v(n);
		HIPTEST_CHECK(hipMemcpy(v.data(), p, n * sizeof(T), hipMemcpyDeviceToHost));
		return v;
	}
};

__global__ void saxpy_kernel(float a, const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = __fmaf_rn(a, x[i], y[i]);
}

void case_saxpy()
{
	const int n = 100000 + 17;
	std::vector<float> x(n), y(n), want(n);
	for (int i = 0; i < n; ++i) {
		x[i] = float(i % 1000) * 0.001f - 0.5f;
		y[i] = float((i * 7) % 333) * 0.25f;
	}
	const float a = 1.75f;
	for (int i = 0; i < n; ++i)
		want[i] = std::fma(a, x[i], y[i]);
	DeviceBuffer<float> dx(n), dy(n);
	step("saxpy: upload");
	dx.upload(x);
	dy.upload(y);
	step("saxpy: kernel");
	hipLaunchKernelGGL(saxpy_kernel, dim3((n + 255) / 256), dim3(256), 0, 0, a, dx.p, dy.p, n);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipDeviceSynchronize());
	step("saxpy: download");
	std::vector<float> got = dy.download();
	hiptest::expect_equal("saxpy y", want.data(), got.data(), n);
}

constexpr int kReduceBlock = 256;

__global__ void reduce_kernel(const int *in, long long *partial, int n)
{
	__shared__ long long lds[kReduceBlock];
	int t = threadIdx.x;
	int i = blockIdx.x * blockDim.x + t;
	lds[t] = i < n ? in[i] : 0;
	__syncthreads();
	for (int s = kReduceBlock / 2; s > 0; s /= 2) {
		if (t < s)
			lds[t] += lds[t + s];
		__syncthreads();
	}
	if (t == 0)
		partial[blockIdx.x] = lds[0];
}

void case_reduce()
{
	const int n = 1 << 20;
	const int blocks = n / kReduceBlock;
	std::vector<int> in(n);
	for (int i = 0; i < n; ++i)
		in[i] = int(hiptest::pattern_byte(7, size_t(i))) - 128 + (i & 1023);
	std::vector<long long> want(blocks, 0);
	for (int i = 0; i < n; ++i)
		want[i / kReduceBlock] += in[i];
	DeviceBuffer<int> din(n);
	DeviceBuffer<long long> dpart(blocks);
	step("reduce: upload");
	din.upload(in);
	step("reduce: kernel");
	hipLaunchKernelGGL(reduce_kernel, dim3(blocks), dim3(kReduceBlock), 0, 0, din.p, dpart.p, n);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipDeviceSynchronize());
	step("reduce: download");
	std::vector<long long> got = dpart.download();
	hiptest::expect_equal("reduce partial sums", want.data(), got.data(), blocks);
}

constexpr int kTile = 16;

// C[M][N] = A[M][K] * B[K][N], row-major; each C element sums k = 0..K-1 in
// order with one fma per term, as matmul_cpu does.
__global__ void matmul_kernel(const float *A, const float *B, float *C, int M, int N, int K)
{
	__shared__ float as[kTile][kTile];
	__shared__ float bs[kTile][kTile];
	int row = blockIdx.y * kTile + threadIdx.y;
	int col = blockIdx.x * kTile + threadIdx.x;
	float acc = 0.0f;
	for (int k0 = 0; k0 < K; k0 += kTile) {
		int ak = k0 + threadIdx.x, bk = k0 + threadIdx.y;
		as[threadIdx.y][threadIdx.x] = row < M && ak < K ? A[row * K + ak] : 0.0f;
		bs[threadIdx.y][threadIdx.x] = bk < K && col < N ? B[bk * N + col] : 0.0f;
		__syncthreads();
		for (int k = 0; k < kTile && k0 + k < K; ++k)
			acc = __fmaf_rn(as[threadIdx.y][k], bs[k][threadIdx.x], acc);
		__syncthreads();
	}
	if (row < M && col < N)
		C[row * N + col] = acc;
}

void case_matmul()
{
	const int M = 67, N = 45, K = 83; // not multiples of the tile
	std::vector<float> A(size_t(M) * K), B(size_t(K) * N), want(size_t(M) * N);
	for (size_t i = 0; i < A.size(); ++i)
		A[i] = float(int(hiptest::pattern_byte(1, i)) - 128) / 64.0f;
	for (size_t i = 0; i < B.size(); ++i)
		B[i] = float(int(hiptest::pattern_byte(2, i)) - 128) / 32.0f;
	for (int r = 0; r < M; ++r)
		for (int c = 0; c < N; ++c) {
			float acc = 0.0f;
			for (int k = 0; k < K; ++k)
				acc = std::fma(A[size_t(r) * K + k], B[size_t(k) * N + c], acc);
			want[size_t(r) * N + c] = acc;
		}
	DeviceBuffer<float> dA(A.size()), dB(B.size()), dC(want.size());
	step("matmul: upload");
	dA.upload(A);
	dB.upload(B);
	step("matmul: kernel");
	dim3 grid((N + kTile - 1) / kTile, (M + kTile - 1) / kTile);
	hipLaunchKernelGGL(matmul_kernel, grid, dim3(kTile, kTile), 0, 0, dA.p, dB.p, dC.p, M, N, K);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipDeviceSynchronize());
	step("matmul: download");
	std::vector<float> got = dC.download();
	hiptest::expect_equal("matmul C", want.data(), got.data(), want.size());
}

// counters: [0] int sum of atomicAdd, [1] CAS winner (initially -1),
// [2] CAS-loop increments; fsum: float atomicAdd of small integers.
__global__ void atomics_kernel(const int *v, int *counters, float *fsum, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n)
		return;
	atomicAdd(&counters[0], v[i]);
	atomicAdd(fsum, float(v[i] & 15));
	atomicCAS(&counters[1], -1, i);
	int old = counters[2], seen;
	do {
		seen = old;
		old = atomicCAS(&counters[2], seen, seen + 1);
	} while (old != seen);
}

void case_atomics()
{
	const int n = 50000;
	std::vector<int> v(n);
	long long sum = 0;
	int fsum_want = 0;
	for (int i = 0; i < n; ++i) {
		v[i] = int(hiptest::pattern_byte(3, size_t(i))) - 100;
		sum += v[i];
		fsum_want += v[i] & 15;
	}
	DeviceBuffer<int> dv(n), dc(3);
	DeviceBuffer<float> df(1);
	step("atomics: upload");
	dv.upload(v);
	dc.upload({0, -1, 0});
	df.upload({0.0f});
	step("atomics: kernel");
	hipLaunchKernelGGL(atomics_kernel, dim3((n + 255) / 256), dim3(256), 0, 0, dv.p, dc.p, df.p, n);
	HIPTEST_CHECK(hipGetLastError());
	HIPTEST_CHECK(hipDeviceSynchronize());
	step("atomics: download");
	std::vector<int> c = dc.download();
	std::vector<float> f = df.download();
	const int want_int[] = {int(sum), c[1], n};
	if (c[1] < 0 || c[1] >= n)
		hiptest::fail("atomicCAS winner: expected an index in [0, %d), got %d", n, c[1]);
	hiptest::expect_equal("atomic int counters", want_int, c.data(), 3);
	const float want_f = float(fsum_want);
	hiptest::expect_equal("atomicAdd float", &want_f, f.data(), 1);
}

} // namespace

int main(int argc, char **argv)
{
	return hiptest::run_cases(argc, argv, hiptest::hip_init,
				  {{"saxpy", case_saxpy},
				   {"reduce", case_reduce},
				   {"matmul", case_matmul},
				   {"atomics", case_atomics}});
}
