// SPDX-License-Identifier: GPL-2.0-only
//
// A deterministic training loop: a multi-layer perceptron (16 inputs, 32
// ReLU hidden units, 4 outputs, mean squared error) trained with plain SGD
// in HIP kernels, and the same math on the CPU in the same order. Every
// element is computed by one function shared by the kernel and the CPU loop
// (__host__ __device__), with explicit fmaf and no contraction
// (-ffp-contract=off), every sum in a fixed order by one thread, no atomics,
// no transcendental functions: the GPU's losses and weights equal the CPU's
// bit for bit, and two runs (or a run checkpointed and restored) print the
// same losses.
//
//   hip_train [--steps N] [--cpu-only] [--no-check]
//             [--gate-after K]... [--gate FILE]
//
// Prints "step K loss <hex float>" for K = 0..N-1 (the loss of the batch
// before step K's update), then "weights <hex of the checksum>". Without
// --no-check each step's loss and, at the end, every weight is compared
// with the CPU reference (the first mismatch fails: step, index, both
// values). --cpu-only runs only the CPU reference (what a checkpoint test
// compares a restored run with). --gate-after K --gate FILE: after step K
// prints "gate K", waits until FILE exists (at most 10 minutes) and removes
// it, so a checkpoint harness can dump the process between two steps;
// --gate-after may be given several times (a gate after each such step,
// each waiting for a new FILE: incremental checkpoints).
#include "hiptest.h"

#include <cmath>
#include <memory>

namespace {

using hiptest::step;

constexpr int kIn = 16, kHidden = 32, kOut = 4, kBatch = 64, kSamples = 1024;
constexpr int kW1 = 0, kB1 = kW1 + kHidden * kIn, kW2 = kB1 + kHidden, kB2 = kW2 + kOut * kHidden;
constexpr int kParams = kB2 + kOut;
constexpr float kLearningRate = 0.0625f;
// d(loss)/d(y) = 2 (y - t) / (B * O): a power of two, so exact.
constexpr float kGradScale = 2.0f / float(kBatch * kOut);
constexpr float kLossScale = 1.0f / float(kBatch * kOut);

// One network's memory, on the GPU or the CPU alike.
struct Net {
	float *param;   // [kParams]
	float *grad;    // [kParams]
	const float *x; // [kBatch][kIn] this step's batch
	const float *t; // [kBatch][kOut] its targets
	float *hpre;    // [kBatch][kHidden]
	float *h;       // [kBatch][kHidden]
	float *dy;      // [kBatch][kOut]
	float *dh;      // [kBatch][kHidden]
	float *loss;    // [1]
};

__host__ __device__ void forward_hidden(const Net &n, int b, int j)
{
	float acc = n.param[kB1 + j];
	for (int i = 0; i < kIn; ++i)
		acc = fmaf(n.param[kW1 + j * kIn + i], n.x[b * kIn + i], acc);
	n.hpre[b * kHidden + j] = acc;
	n.h[b * kHidden + j] = acc > 0.0f ? acc : 0.0f;
}

__host__ __device__ void forward_output(const Net &n, int b, int o)
{
	float acc = n.param[kB2 + o];
	for (int j = 0; j < kHidden; ++j)
		acc = fmaf(n.param[kW2 + o * kHidden + j], n.h[b * kHidden + j], acc);
	n.dy[b * kOut + o] = (acc - n.t[b * kOut + o]) * kGradScale; // keeps y - t scaled
}

// One thread: the loss from dy (= (y - t) * kGradScale), summed in order.
__host__ __device__ void loss_sum(const Net &n)
{
	float acc = 0.0f;
	for (int k = 0; k < kBatch * kOut; ++k) {
		float d = n.dy[k] / kGradScale; // exact: a power of two
		acc = fmaf(d, d, acc);
	}
	n.loss[0] = acc * kLossScale;
}

__host__ __device__ void grad_output_layer(const Net &n, int o, int j)
{
	float acc = 0.0f;
	for (int b = 0; b < kBatch; ++b)
		acc = fmaf(n.dy[b * kOut + o], j < kHidden ? n.h[b * kHidden + j] : 1.0f, acc);
	n.grad[j < kHidden ? kW2 + o * kHidden + j : kB2 + o] = acc;
}

__host__ __device__ void backward_hidden(const Net &n, int b, int j)
{
	float acc = 0.0f;
	for (int o = 0; o < kOut; ++o)
		acc = fmaf(n.param[kW2 + o * kHidden + j], n.dy[b * kOut + o], acc);
	n.dh[b * kHidden + j] = n.hpre[b * kHidden + j] > 0.0f ? acc : 0.0f;
}

__host__ __device__ void grad_hidden_layer(const Net &n, int j, int i)
{
	float acc = 0.0f;
	for (int b = 0; b < kBatch; ++b)
		acc = fmaf(n.dh[b * kHidden + j], i < kIn ? n.x[b * kIn + i] : 1.0f, acc);
	n.grad[i < kIn ? kW1 + j * kIn + i : kB1 + j] = acc;
}

__host__ __device__ void sgd_update(const Net &n, int p)
{
	n.param[p] = fmaf(-kLearningRate, n.grad[p], n.param[p]);
}

// The phases of one step, in order: name, rows, columns, element function.
enum Phase { kFwdHidden, kFwdOutput, kLoss, kGradOut, kBackHidden, kGradHidden, kUpdate, kPhases };
__host__ __device__ inline void phase_shape(int phase, int &rows, int &cols)
{
	const int shapes[kPhases][2] = {{kBatch, kHidden}, {kBatch, kOut},	     {1, 1},
					{kOut, kHidden + 1}, {kBatch, kHidden}, {kHidden, kIn + 1},
					{1, kParams}};
	rows = shapes[phase][0];
	cols = shapes[phase][1];
}
__host__ __device__ void run_element(int phase, const Net &n, int r, int c)
{
	switch (phase) {
	case kFwdHidden: forward_hidden(n, r, c); break;
	case kFwdOutput: forward_output(n, r, c); break;
	case kLoss: loss_sum(n); break;
	case kGradOut: grad_output_layer(n, r, c); break;
	case kBackHidden: backward_hidden(n, r, c); break;
	case kGradHidden: grad_hidden_layer(n, r, c); break;
	default: sgd_update(n, c); break;
	}
}

__global__ void phase_kernel(int phase, Net n)
{
	int rows, cols;
	phase_shape(phase, rows, cols);
	int k = blockIdx.x * blockDim.x + threadIdx.x;
	if (k < rows * cols)
		run_element(phase, n, k / cols, k % cols);
}

// The data set and the initial weights, from a fixed seed.
float unit(uint32_t seed, size_t i) // in [-1, 1), multiples of 1/128
{
	return float(int(hiptest::pattern_byte(seed, i)) - 128) / 128.0f;
}

struct Data {
	std::vector<float> x, t, init;
	Data() : x(size_t(kSamples) * kIn), t(size_t(kSamples) * kOut), init(kParams)
	{
		for (size_t k = 0; k < x.size(); ++k)
			x[k] = unit(11, k);
		for (int s = 0; s < kSamples; ++s)
			for (int o = 0; o < kOut; ++o) // a fixed teacher: sums of pairs of inputs
				t[size_t(s) * kOut + o] = x[size_t(s) * kIn + o] - 0.5f * x[size_t(s) * kIn + o + 4] +
							  (x[size_t(s) * kIn + o + 8] > 0.0f ? 0.25f : -0.25f);
		for (int p = 0; p < kParams; ++p)
			init[size_t(p)] = unit(12, size_t(p)) * (p < kW2 ? 0.25f : 0.125f);
	}
	const float *batch_x(int step) const { return x.data() + size_t(step % (kSamples / kBatch)) * kBatch * kIn; }
	const float *batch_t(int step) const { return t.data() + size_t(step % (kSamples / kBatch)) * kBatch * kOut; }
};

// The CPU reference: the same elements in row-major order.
struct CpuNet {
	std::vector<float> param, grad, hpre, h, dy, dh, loss;
	explicit CpuNet(const Data &d)
		: param(d.init), grad(kParams), hpre(kBatch * kHidden), h(kBatch * kHidden), dy(kBatch * kOut),
		  dh(kBatch * kHidden), loss(1)
	{
	}
	float train_step(const Data &d, int s)
	{
		Net n{param.data(), grad.data(), d.batch_x(s), d.batch_t(s), hpre.data(), h.data(), dy.data(),
		      dh.data(), loss.data()};
		for (int phase = 0; phase < kPhases; ++phase) {
			int rows, cols;
			phase_shape(phase, rows, cols);
			for (int r = 0; r < rows; ++r)
				for (int c = 0; c < cols; ++c)
					run_element(phase, n, r, c);
		}
		return loss[0];
	}
};

struct GpuNet {
	float *mem = nullptr; // one allocation: param, grad, activations, batch
	Net n{};
	explicit GpuNet(const Data &d)
	{
		const size_t floats = 2 * kParams + 3 * kBatch * kHidden + kBatch * kOut + 1 + kBatch * (kIn + kOut);
		HIPTEST_CHECK(hipMalloc(&mem, floats * sizeof(float)));
		float *p = mem;
		auto take = [&p](size_t k) { float *q = p; p += k; return q; };
		n.param = take(kParams);
		n.grad = take(kParams);
		n.hpre = take(kBatch * kHidden);
		n.h = take(kBatch * kHidden);
		n.dh = take(kBatch * kHidden);
		n.dy = take(kBatch * kOut);
		n.loss = take(1);
		n.x = take(kBatch * kIn);
		n.t = take(kBatch * kOut);
		HIPTEST_CHECK(hipMemcpy(n.param, d.init.data(), kParams * sizeof(float), hipMemcpyHostToDevice));
	}
	~GpuNet() { (void)hipFree(mem); }
	GpuNet(const GpuNet &) = delete;
	GpuNet &operator=(const GpuNet &) = delete;
	float train_step(const Data &d, int s)
	{
		HIPTEST_CHECK(hipMemcpy(const_cast<float *>(n.x), d.batch_x(s), kBatch * kIn * sizeof(float),
					hipMemcpyHostToDevice));
		HIPTEST_CHECK(hipMemcpy(const_cast<float *>(n.t), d.batch_t(s), kBatch * kOut * sizeof(float),
					hipMemcpyHostToDevice));
		for (int phase = 0; phase < kPhases; ++phase) {
			int rows, cols;
			phase_shape(phase, rows, cols);
			const int threads = 64;
			hipLaunchKernelGGL(phase_kernel, dim3((rows * cols + threads - 1) / threads), dim3(threads), 0, 0,
					   phase, n);
			HIPTEST_CHECK(hipGetLastError());
		}
		float loss = 0.0f;
		HIPTEST_CHECK(hipMemcpy(&loss, n.loss, sizeof(float), hipMemcpyDeviceToHost));
		return loss;
	}
	std::vector<float> params() const
	{
		std::vector<float> v(kParams);
		HIPTEST_CHECK(hipMemcpy(v.data(), n.param, kParams * sizeof(float), hipMemcpyDeviceToHost));
		return v;
	}
};

struct Options {
	int steps = 50;
	bool cpu_only = false, check = true;
	hiptest::Gates gates;
};

Options parse(int argc, char **argv)
{
	Options o;
	hiptest::parse_command_line(argc, argv, "--steps", o.steps,
				    {{"--cpu-only", &o.cpu_only, true}, {"--no-check", &o.check, false}}, o.gates);
	return o;
}

uint32_t checksum(const std::vector<float> &v)
{
	uint32_t h = 2166136261u;
	for (float f : v) {
		uint32_t u;
		std::memcpy(&u, &f, sizeof(u));
		h = (h ^ u) * 16777619u;
	}
	return h;
}

} // namespace

int main(int argc, char **argv)
{
	const Options o = parse(argc, argv);
	const Data data;
	CpuNet cpu(data);
	std::unique_ptr<GpuNet> gpu;
	if (!o.cpu_only) {
		hiptest::hip_init();
		step("allocate and upload the initial weights");
		gpu = std::make_unique<GpuNet>(data);
	}
	for (int s = 0; s < o.steps; ++s) {
		step("training step " + std::to_string(s));
		float loss = gpu ? gpu->train_step(data, s) : cpu.train_step(data, s);
		if (gpu && o.check) {
			float want = cpu.train_step(data, s);
			if (std::memcmp(&want, &loss, sizeof(float)) != 0)
				hiptest::fail("step %d loss: expected %a (CPU), got %a (GPU)", s, double(want), double(loss));
		}
		std::printf("step %d loss %a\n", s, double(loss));
		std::fflush(stdout);
		if (o.gates.after_step(s))
			o.gates.wait(s);
	}
	step("download the weights");
	std::vector<float> final = gpu ? gpu->params() : cpu.param;
	if (gpu && o.check)
		hiptest::expect_equal("weights after the last step", cpu.param.data(), final.data(), kParams);
	std::printf("weights %08x\n", checksum(final));
	std::fflush(stdout);
	step(hiptest::kTeardown);
	return 0;
}
