// SPDX-License-Identifier: GPL-2.0-only
//
// amdgpu render nodes: DRM core ioctls used on render nodes, the amdgpu
// driver ioctls, render-node mmap and command submission.
#include "model/state.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>

namespace kfdemu::detail {

using namespace abi::drm;

namespace {

// The stable pstates (AMDGPU_CTX_STABLE_PSTATE_*) as the performance levels
// amdgpu_ctx_set_stable_pstate forces, in power_dpm_force_performance_level's
// words.
constexpr const char *kPstateLevels[] = {"auto", "profile_standard", "profile_min_sclk", "profile_min_mclk",
					 "profile_peak"};

uint32_t pstate_of_level(const std::string &level)
{
	for (uint32_t i = 1; i < std::size(kPstateLevels); ++i)
		if (level == kPstateLevels[i])
			return i;
	return 0;
}

std::string dpm_level_path(const std::string &root, const Device &d)
{
	return root + "/sys/devices/pci0000:00/" + d.node->pci_slot + "/power_dpm_force_performance_level";
}

// The GPU's forced performance level: what its sysfs file says (a program
// may have written it), "auto" without a sysfs root.
std::string read_dpm_level(const std::string &root, const Device &d)
{
	if (root.empty() || d.node->pci_slot.empty())
		return d.dpm_level;
	std::string v;
	char buf[64];
	const int fd = ::open(dpm_level_path(root, d).c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return "auto";
	const ssize_t n = ::read(fd, buf, sizeof buf);
	::close(fd);
	if (n > 0)
		v.assign(buf, size_t(n));
	while (!v.empty() && (v.back() == '\n' || v.back() == ' '))
		v.pop_back();
	return v;
}

// amdgpu_ctx_set_stable_pstate: another context holding the level: EBUSY;
// the level forced (written to the sysfs file, as amdgpu_dpm_force_
// performance_level changes what it shows) and the holder recorded, or
// released when set back to NONE.
long set_stable_pstate(const std::string &root, DrmFile &f, uint32_t ctx_id, uint32_t pstate)
{
	Device &d = *f.dev;
	const std::pair<FileKey, uint32_t> me{f.key, ctx_id};
	if (d.pstate_ctx && *d.pstate_ctx != me)
		return -EBUSY;
	if (pstate == pstate_of_level(read_dpm_level(root, d)))
		return 0;
	if (!root.empty() && !d.node->pci_slot.empty()) {
		const int fd = ::open(dpm_level_path(root, d).c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
		if (fd >= 0) {
			const std::string v = std::string(kPstateLevels[pstate]) + "\n";
			(void)!::write(fd, v.data(), v.size());
			::close(fd);
		}
	}
	d.dpm_level = kPstateLevels[pstate];
	if (pstate == 0)
		d.pstate_ctx.reset();
	else
		d.pstate_ctx = me;
	return 0;
}

uint64_t mono_ns()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// amdgpu_gem_timeout(): absolute CLOCK_MONOTONIC ns; negative = forever.
// Returns nullopt for "forever".
std::optional<std::chrono::steady_clock::time_point> deadline_of(uint64_t timeout_ns)
{
	if (static_cast<int64_t>(timeout_ns) < 0)
		return std::nullopt;
	return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(timeout_ns));
}

// Waits for a fence until the deadline. true when signaled.
bool wait_fence(Fence &f, std::optional<std::chrono::steady_clock::time_point> dl)
{
	std::unique_lock lk(f.mu);
	if (!dl) {
		f.cv.wait(lk, [&] { return f.done; });
		return true;
	}
	return f.cv.wait_until(lk, *dl, [&] { return f.done; });
}

void put32(uint8_t *b, size_t off, uint32_t v) { std::memcpy(b + off, &v, 4); }
void put64(uint8_t *b, size_t off, uint64_t v) { std::memcpy(b + off, &v, 8); }

constexpr size_t kFenceWindow = 1024;

constexpr uint32_t kMaxIbs = 4;

} // namespace

int ModelImpl::resolve_va(DrmFile &f, uint64_t va, uint64_t len, bool write, std::vector<Segment> *out)
{
	uint64_t cur = va & kHoleMask;
	while (len) {
		const Mapping *m = f.vm.find(cur);
		if ((!m || !m->bo) && f.kfd_owner) { // an SVM range of the KFD process (svm.cpp)
			Segment s;
			if (int e = svm_gpu_access(f, cur, len, write, &s))
				return e;
			cur += s.len;
			len -= s.len;
			out->push_back(std::move(s));
			continue;
		}
		if (!m || !m->bo) {
			counters_->vm_fault(f.dev->gpu_id, cur, "unmapped");
			return -EFAULT;
		}
		if ((write && !(m->flags & VM_PAGE_WRITEABLE)) || (!write && !(m->flags & VM_PAGE_READABLE))) {
			counters_->vm_fault(f.dev->gpu_id, cur, write ? "write to read-only page" : "read of unreadable page");
			return -EFAULT;
		}
		uint64_t off = m->offset + (cur - m->start);
		uint64_t avail = m->start + m->size - cur;
		if (off >= m->bo->size) {
			counters_->vm_fault(f.dev->gpu_id, cur, "beyond bo");
			return -EFAULT;
		}
		avail = std::min(avail, m->bo->size - off);
		uint64_t n = std::min(avail, len);
		if (!out->empty() && out->back().bo == m->bo && out->back().off + out->back().len == off)
			out->back().len += n;
		else
			out->push_back(Segment{m->bo, off, n});
		cur += n;
		len -= n;
	}
	return 0;
}

int ModelImpl::read_ib(DrmFile &f, uint64_t ib_va, uint32_t ib_bytes, std::vector<uint32_t> *out)
{
	std::vector<Segment> ibseg;
	// The IB must lie inside one mapping of this VM (else EINVAL).
	const Mapping *m = f.vm.find(ib_va & kHoleMask);
	if (!m || !m->bo || (ib_va & kHoleMask) + ib_bytes > m->start + m->size)
		return -EINVAL;
	if ((ib_bytes & 3) || ib_bytes > (64u << 20))
		return -EINVAL;
	if (resolve_va(f, ib_va, ib_bytes, false, &ibseg))
		return -EINVAL;
	std::vector<uint32_t> &dw = *out;
	dw.assign(ib_bytes / 4, 0);
	auto *dst = reinterpret_cast<uint8_t *>(dw.data());
	for (auto &s : ibseg) {
		if (s.bo->mem)
			std::memcpy(dst, s.bo->mem->data() + s.off, s.len);
		else if (pm_->read(s.bo->userptr_tgid, s.bo->userptr_addr + s.off, dst, s.len))
			return -EFAULT;
		dst += s.len;
	}
	return 0;
}

int ModelImpl::build_job(DrmFile &f, uint64_t ib_va, uint32_t ib_bytes, SdmaJob *job)
{
	using namespace abi::sdma;
	std::vector<uint32_t> dw;
	if (int e = read_ib(f, ib_va, ib_bytes, &dw))
		return e;
	const bool ai = f.dev->family >= kFamilyAi;
	// Count field width: 30 bits from SDMA v6 (GC11), 22 bits on VI..NV,
	// 21 bits on CIK (family < 130).
	const uint32_t count_mask = f.dev->family >= kFamilyGc11 ? 0x3fffffffu
				  : f.dev->family >= 130      ? 0x3fffffu
							      : 0x1fffffu;
	auto fail = [&](int err) {
		job->error_after_ops = err;
		return 0;
	};
	size_t i = 0;
	const size_t n = dw.size();
	while (i < n) {
		uint32_t hdr = dw[i];
		uint32_t op = hdr & 0xff, sub = (hdr >> 8) & 0xff;
		auto addr = [&](size_t k) { return static_cast<uint64_t>(dw[k]) | (static_cast<uint64_t>(dw[k + 1]) << 32); };
		if (op == OP_NOP) {
			i += 1 + ((hdr >> 16) & 0x3fff);
			continue;
		}
		if (op == OP_COPY && sub == SUBOP_COPY_LINEAR) {
			if (i + 7 > n)
				return fail(-ETIME);
			uint64_t cnt = dw[i + 1] & count_mask;
			uint64_t bytes = ai ? cnt + 1 : cnt;
			SdmaOp o;
			o.kind = SdmaOp::Kind::Copy;
			o.bytes = bytes;
			if (bytes && (resolve_va(f, addr(i + 3), bytes, false, &o.src) ||
				      resolve_va(f, addr(i + 5), bytes, true, &o.dst)))
				return fail(-ECANCELED);
			if (bytes)
				job->ops.push_back(std::move(o));
			i += 7;
			continue;
		}
		if ((op == OP_WRITE && sub == SUBOP_WRITE_LINEAR) || op == OP_FENCE) {
			size_t ndw;
			if (op == OP_FENCE) {
				ndw = 1;
				if (i + 4 > n)
					return fail(-ETIME);
			} else {
				if (i + 4 > n)
					return fail(-ETIME);
				ndw = ai ? (dw[i + 3] & 0xfffff) + 1 : (dw[i + 3] & 0x3fffff);
				if (i + 4 + ndw > n)
					return fail(-ETIME);
			}
			SdmaOp o;
			o.kind = SdmaOp::Kind::Write;
			o.bytes = ndw * 4;
			const uint32_t *src = &dw[i + (op == OP_FENCE ? 3 : 4)];
			o.data.assign(reinterpret_cast<const uint8_t *>(src), reinterpret_cast<const uint8_t *>(src + ndw));
			if (resolve_va(f, addr(i + 1), o.bytes, true, &o.dst))
				return fail(-ECANCELED);
			job->ops.push_back(std::move(o));
			i += op == OP_FENCE ? 4 : 4 + ndw;
			continue;
		}
		if (op == OP_CONST_FILL) {
			if (i + 5 > n)
				return fail(-ETIME);
			uint64_t cnt = dw[i + 4] & count_mask;
			uint64_t bytes = ai ? cnt + 1 : cnt;
			uint32_t fillsize = hdr >> 30; // 0 byte, 2 dword
			SdmaOp o;
			o.kind = SdmaOp::Kind::Fill;
			o.fill = fillsize == 0 ? (dw[i + 3] & 0xff) * 0x01010101u : dw[i + 3];
			o.bytes = bytes;
			if (bytes && resolve_va(f, addr(i + 1), bytes, true, &o.dst))
				return fail(-ECANCELED);
			if (bytes)
				job->ops.push_back(std::move(o));
			i += 5;
			continue;
		}
		if (op == OP_TRAP) {
			i += 2;
			continue;
		}
		// Unknown packet: the engine hangs on it until the job times out.
		counters_->vm_fault(f.dev->gpu_id, ib_va + i * 4, "unknown sdma packet");
		return fail(-ETIME);
	}
	return 0;
}

long ModelImpl::drm_cs(Caller &c, DrmFile &f, Cs &a)
{
	if (a.num_chunks == 0 || a.num_chunks > 64)
		return -EINVAL;
	auto ci = f.ctxs.find(a.ctx_id);
	if (ci == f.ctxs.end())
		return -EINVAL;
	if (ci->second.guilty->load())
		return -ECANCELED;
	if (a.bo_list_handle && !f.bo_lists.count(a.bo_list_handle))
		return -ENOENT;
	std::vector<uint64_t> ptrs(a.num_chunks);
	if (c.read(a.chunks, ptrs.data(), ptrs.size() * 8))
		return -EFAULT;
	std::vector<CsChunkIb> ibs;
	std::vector<std::shared_ptr<Fence>> deps;
	for (uint64_t p : ptrs) {
		CsChunk ch{};
		if (c.read(p, &ch, sizeof ch))
			return -EFAULT;
		size_t bytes = static_cast<size_t>(ch.length_dw) * 4;
		switch (ch.chunk_id) {
		case CHUNK_IB: {
			CsChunkIb ib{};
			if (c.read(ch.chunk_data, &ib, std::min(bytes, sizeof ib)))
				return -EFAULT;
			ibs.push_back(ib);
			break;
		}
		case CHUNK_DEPENDENCIES:
		case CHUNK_SCHEDULED_DEPENDENCIES: {
			struct Dep { uint32_t ip_type, ip_instance, ring, ctx_id; uint64_t handle; };
			if (bytes > 64 * 1024)
				return -EINVAL;
			size_t nd = bytes / sizeof(Dep);
			std::vector<Dep> d(nd);
			if (nd && c.read(ch.chunk_data, d.data(), nd * sizeof(Dep)))
				return -EFAULT;
			for (auto &x : d) {
				auto dc = f.ctxs.find(x.ctx_id);
				if (dc == f.ctxs.end())
					return -EINVAL;
				auto en = dc->second.entities.find({x.ip_type, x.ip_instance, x.ring});
				if (en == dc->second.entities.end())
					continue;
				auto fe = en->second.fences.find(x.handle);
				if (fe != en->second.fences.end())
					deps.push_back(fe->second);
			}
			break;
		}
		case CHUNK_FENCE:
		case CHUNK_BO_HANDLES:
			break;
		default:
			return -EINVAL;
		}
	}
	if (ibs.empty() || ibs.size() > kMaxIbs)
		return -EINVAL;
	const CsChunkIb &first = ibs.front();
	for (auto &ib : ibs)
		if (ib.ip_type != first.ip_type || ib.ip_instance != first.ip_instance || ib.ring != first.ring)
			return -EINVAL;
	// The model executes the DMA rings' SDMA packets and the COMPUTE
	// rings' PM4 packets that need no shader (amdgpu_ctx_get_entity: a
	// ring beyond the IP's: EINVAL; GFX: no ring on these chips).
	const bool compute = first.ip_type == HW_IP_COMPUTE;
	auto &rings = compute ? f.dev->compute_rings : f.dev->engines;
	if ((first.ip_type != HW_IP_DMA && !compute) || first.ip_instance != 0 || first.ring >= rings.size())
		return -EINVAL;

	SdmaJob job;
	job.gpu_id = f.dev->gpu_id;
	job.guilty = ci->second.guilty;
	for (auto &ib : ibs) {
		if (int e = compute ? build_pm4_job(f, ib.va_start, ib.ib_bytes, &job)
				    : build_job(f, ib.va_start, ib.ib_bytes, &job))
			return e;
		if (job.error_after_ops)
			break;
	}
	bool hang = false;
	if (int e = check_fault_sdma(&hang)) {
		if (hang)
			job.hang = true;
		else
			job.error_after_ops = e;
		job.ops.clear();
	}
	// Every BO the job touches is busy until it ends (GEM_WAIT_IDLE).
	for (auto &op : job.ops)
		for (auto *segs : {&op.src, &op.dst})
			for (auto &sg : *segs)
				if (std::find(job.busy.begin(), job.busy.end(), sg.bo) == job.busy.end())
					job.busy.push_back(sg.bo);
	for (auto &b : job.busy)
		++b->busy;
	auto &ent = ci->second.entities[{first.ip_type, first.ip_instance, first.ring}];
	uint64_t seq = ent.next_seq++;
	job.fence = std::make_shared<Fence>();
	ent.fences[seq] = job.fence;
	while (ent.fences.size() > kFenceWindow) {
		auto oldest = ent.fences.begin();
		std::lock_guard fl(oldest->second->mu);
		if (!oldest->second->done)
			break;
		ent.fences.erase(oldest);
	}
	(void)deps; // ordering: one engine per ring executes in order
	rings[first.ring]->submit(std::move(job));
	std::memset(&a, 0, sizeof a);
	std::memcpy(&a, &seq, 8);
	return 0;
}

long ModelImpl::drm_wait_cs(Lock &lk, DrmFile &f, WaitCs &a)
{
	auto ci = f.ctxs.find(a.ctx_id);
	if (ci == f.ctxs.end())
		return -EINVAL;
	if (a.ip_type >= HW_IP_NUM || a.ip_instance != 0 ||
	    (a.ip_type == HW_IP_DMA && a.ring >= f.dev->engines.size()))
		return -EINVAL;
	std::shared_ptr<Fence> fence;
	auto en = ci->second.entities.find({a.ip_type, a.ip_instance, a.ring});
	uint64_t next = en == ci->second.entities.end() ? 1 : en->second.next_seq;
	uint64_t seq = a.handle == ~0ull ? next - 1 : a.handle;
	if (seq >= next && seq != 0)
		return -EINVAL;
	if (en != ci->second.entities.end()) {
		auto fe = en->second.fences.find(seq);
		if (fe != en->second.fences.end())
			fence = fe->second;
	}
	auto dl = deadline_of(a.timeout);
	std::memset(&a, 0, sizeof a);
	if (!fence)
		return 0; // status 0: completed (or never waited on)
	lk.unlock();
	bool done = wait_fence(*fence, dl);
	lk.lock();
	if (done && fence->error)
		return fence->error;
	uint64_t status = done ? 0 : 1;
	std::memcpy(&a, &status, 8);
	return 0;
}

long ModelImpl::drm_prime_to_fd(Caller &c, DrmFile &f, PrimeHandle &a, uint64_t uarg)
{
	if (a.flags & ~(CLOEXEC | RDWR))
		return -EINVAL;
	auto it = f.handles().find(a.handle);
	if (it == f.handles().end())
		return -ENOENT;
	// amdgpu_gem_prime_export: userptr and per-VM (VM_ALWAYS_VALID) BOs
	// cannot be shared.
	if (it->second->is_userptr() || !it->second->mem || (it->second->domain_flags & CREATE_VM_ALWAYS_VALID))
		return -EPERM;
	export_dmabuf(c, it->second, a.flags & CLOEXEC, uarg + offsetof(PrimeHandle, fd), false);
	return 0;
}

long ModelImpl::drm_fd_to_prime(Caller &c, DrmFile &f, PrimeHandle &a)
{
	auto key = c.resolve_fd(a.fd);
	if (!key)
		return -EBADF;
	auto src = dmabuf_bo(*key);
	if (!src)
		return -EINVAL;
	const Bo *exp = src->exporter();
	// The prime cache: a handle this file already has for that dma-buf.
	if (uint32_t h = f.handle_of_export(exp)) {
		a.handle = h;
		return 0;
	}
	std::shared_ptr<Bo> bo;
	if (src->dev == f.dev) {
		bo = src; // a dma-buf of this device resolves to the BO itself
	} else {
		bo = std::make_shared<Bo>();
		bo->dev = f.dev;
		bo->type = BoType::Gtt;
		bo->size = src->size;
		bo->mem = src->mem;
		bo->import_of = src->import_of ? src->import_of : src;
		// amdgpu_dma_buf_create_obj: a GTT BO with page alignment that
		// inherits the exporter's caching flags.
		bo->domains = DOMAIN_GTT;
		bo->alignment = kPage;
		bo->domain_flags = (bo->import_of->domain_flags & CREATE_IMPORT_INHERITED) | CREATE_ON_EVERY_BO;
		bo->fake_offset = f.dev->alloc_fake_offset(bo);
	}
	uint32_t h = f.lowest_free_handle();
	f.add_handle(h, bo);
	a.handle = h;
	return 0;
}

int ModelImpl::render_mmap(DrmFile &f, uint64_t offset, uint64_t len, MmapTarget *out)
{
	auto bo = f.dev->bo_at_offset(offset);
	if (!bo)
		return -EINVAL;
	bool allowed = f.handle_of(bo.get()) != 0;
	if (!allowed) {
		auto k = f.kfd_mmap.find(bo->fake_offset);
		allowed = k != f.kfd_mmap.end() && k->second.lock() == bo;
	}
	if (!allowed)
		return -EACCES;
	if (!bo->mem)
		return -EPERM;
	uint64_t rel = offset - bo->fake_offset;
	if (len > page_align(bo->size) - rel)
		return -EINVAL;
	*out = MmapTarget{bo->mem->fd(), rel};
	return 0;
}

namespace {

// AMDGPU_INFO_DEV_INFO's struct drm_amdgpu_info_device for device `d`.
void fill_dev_info(const Device &d, uint8_t *b)
{
	using namespace devinfo;
	const NodeDesc &n = *d.node;
	uint32_t simd_per_cu = static_cast<uint32_t>(n.property("simd_per_cu", 4));
	uint32_t cus = static_cast<uint32_t>(n.property("simd_count", 240) / (simd_per_cu ? simd_per_cu : 4));
	uint32_t arrays = static_cast<uint32_t>(n.property("array_count", 4));
	uint32_t sa_per_se = static_cast<uint32_t>(n.property("simd_arrays_per_engine", 1));
	uint32_t ses = sa_per_se ? arrays / sa_per_se : arrays;
	uint32_t cu_per_sa = static_cast<uint32_t>(n.property("cu_per_simd_array", 16));
	put32(b, device_id, n.pci_device_id ? n.pci_device_id : static_cast<uint32_t>(n.property("device_id")));
	put32(b, chip_rev, n.rev_id);
	put32(b, external_rev, n.external_rev_id);
	put32(b, pci_rev, n.pci_revision);
	put32(b, family, d.family);
	put32(b, num_shader_engines, ses ? ses : 1);
	put32(b, num_shader_arrays_per_engine, sa_per_se ? sa_per_se : 1);
	put32(b, gpu_counter_freq, 100000);
	put64(b, max_engine_clock, n.property("max_engine_clk_fcompute", 1500) * 1000);
	uint64_t memclk = n.mem_banks.empty() ? 1200 : n.mem_banks.front().mem_clk_max;
	put64(b, max_memory_clock, memclk * 1000);
	put32(b, cu_active_number, cus);
	put32(b, cu_ao_mask, 0xffffffff);
	for (uint32_t se = 0; se < 4 && se < ses; ++se)
		for (uint32_t sh = 0; sh < 4 && sh < sa_per_se; ++sh) {
			uint32_t bits = cu_per_sa >= 32 ? 0xffffffffu : (1u << cu_per_sa) - 1;
			put32(b, cu_bitmap + (se * 4 + sh) * 4, bits);
			put32(b, cu_ao_bitmap + (se * 4 + sh) * 4, bits);
		}
	put32(b, enabled_rb_pipes_mask, 0xffff);
	put32(b, num_rb_pipes, 16);
	put32(b, num_hw_gfx_contexts, 8);
	put64(b, ids_flags, 0);
	put64(b, virtual_address_offset, kVaReservedBottom);
	put64(b, virtual_address_max, std::min(kVmSize, kHoleStart));
	put32(b, virtual_address_alignment, static_cast<uint32_t>(kPage));
	put32(b, pte_fragment_size, 2u << 20);
	put32(b, gart_page_size, static_cast<uint32_t>(kPage));
	put32(b, vram_type, 6); // HBM
	put32(b, vram_bit_width, n.mem_banks.empty() ? 4096 : n.mem_banks.front().width);
	put32(b, wave_front_size, static_cast<uint32_t>(n.property("wave_front_size", 64)));
	put32(b, num_shader_visible_vgprs, 256);
	put32(b, num_cu_per_sh, cu_per_sa);
	put32(b, num_tcc_blocks, 16);
	put64(b, high_va_offset, kHoleEnd);
	put64(b, high_va_max, kHoleEnd | kVmSize);
}

// AMDGPU_INFO_READ_MMR_REG: the `cnt` registers from `reg` on that the
// model knows (GB_ADDR_CONFIG and the tiling registers, which read 0);
// -EINVAL for more than 128 or any other register.
int read_mmr(const NodeDesc &n, uint32_t reg, uint32_t cnt, std::vector<uint32_t> *out)
{
	if (cnt > 128)
		return -EINVAL;
	std::vector<uint32_t> &vals = *out;
	vals.assign(cnt, 0);
	for (uint32_t i = 0; i < cnt; ++i) {
		uint32_t r = reg + i;
		switch (r) {
		case 0x263e: // GB_ADDR_CONFIG
			vals[i] = static_cast<uint32_t>(n.property("gb_addr_config", 0x26010042));
			break;
		case 0x263d: case 0x2644: case 0x2664: case 0x9d8: case 0xa0d4: case 0xa0d5:
			vals[i] = 0;
			break;
		default:
			if (r >= 0x2644 && r < 0x2644 + 32)
				vals[i] = 0;
			else if (r >= 0x2664 && r < 0x2664 + 16)
				vals[i] = 0;
			else
				return -EINVAL;
		}
	}
	return 0;
}

// AMDGPU_INFO_HW_IP_INFO of IP `type` (instance 0) on device `d`.
HwIpInfo hw_ip_info(const Device &d, uint32_t type)
{
	const NodeDesc &n = *d.node;
	HwIpInfo h{};
	h.ib_start_alignment = 32;
	h.ib_size_alignment = 32;
	switch (type) {
	case HW_IP_GFX:
		h.hw_ip_version_major = d.family >= abi::sdma::kFamilyAi ? 9 : 8;
		// Compute-only chips (Arcturus, Aldebaran, GC 9.4.3) have
		// no GFX ring: num_gfx_rings 0, so no ring is available.
		h.available_rings = n.gfx_ring ? 1 : 0;
		break;
	case HW_IP_COMPUTE:
		h.hw_ip_version_major = d.family >= abi::sdma::kFamilyAi ? 9 : 8;
		h.available_rings = (1u << kComputeRings) - 1;
		break;
	case HW_IP_DMA:
		h.hw_ip_version_major = d.family >= abi::sdma::kFamilyGc11 ? 6 : d.family >= abi::sdma::kFamilyNv ? 5 : d.family >= abi::sdma::kFamilyAi ? 4 : 3;
		h.ib_start_alignment = 256;
		h.ib_size_alignment = 4;
		h.available_rings = static_cast<uint32_t>((1ull << d.engines.size()) - 1);
		break;
	default:
		break;
	}
	return h;
}

} // namespace

long ModelImpl::drm_info(Caller &c, DrmFile &f, const Info &a)
{
	if (!a.return_size || !a.return_pointer)
		return -EINVAL;
	Device &d = *f.dev;
	const NodeDesc &n = *d.node;
	auto give = [&](const void *p, size_t sz) -> long {
		if (c.write(a.return_pointer, p, std::min<size_t>(sz, a.return_size)))
			return -EFAULT;
		return 0;
	};
	switch (a.query) {
	case INFO_ACCEL_WORKING: {
		uint32_t one = 1;
		return give(&one, 4);
	}
	case INFO_DEV_INFO: {
		uint8_t b[devinfo::kSize] = {};
		fill_dev_info(d, b);
		return give(b, sizeof b);
	}
	case INFO_READ_MMR_REG: {
		std::vector<uint32_t> vals;
		if (int e = read_mmr(n, a.u[0], a.u[1], &vals))
			return e;
		if (vals.empty())
			return 0;
		return give(vals.data(), vals.size() * 4);
	}
	case INFO_HW_IP_INFO: {
		if (a.u[0] >= HW_IP_NUM || a.u[1] != 0)
			return -EINVAL;
		HwIpInfo h = hw_ip_info(d, a.u[0]);
		return give(&h, sizeof h);
	}
	case INFO_HW_IP_COUNT: {
		if (a.u[0] >= HW_IP_NUM)
			return -EINVAL;
		uint32_t cnt = a.u[0] <= HW_IP_DMA ? 1 : 0;
		return give(&cnt, 4);
	}
	case INFO_FW_VERSION: {
		FirmwareInfo fw{static_cast<uint32_t>(n.property("fw_version", 65)), 1};
		if (a.u[0] == 0x0d) // AMDGPU_INFO_FW_SDMA
			fw.ver = static_cast<uint32_t>(n.property("sdma_fw_version", 18));
		return give(&fw, sizeof fw);
	}
	case INFO_TIMESTAMP: {
		uint64_t t = mono_ns() / 10;
		return give(&t, 8);
	}
	case INFO_VRAM_GTT: {
		VramGtt v{d.vram_size, n.large_bar ? d.vram_size : 256ull << 20, d.gtt_size};
		return give(&v, sizeof v);
	}
	case INFO_MEMORY: {
		MemoryInfo m{};
		uint64_t used = *d.vram_used;
		m.vram = HeapInfo{d.vram_size, d.vram_size, used, d.vram_size * 3 / 4};
		uint64_t vis = n.large_bar ? d.vram_size : 256ull << 20;
		m.cpu_accessible_vram = HeapInfo{vis, vis, std::min(used, vis), vis * 3 / 4};
		m.gtt = HeapInfo{d.gtt_size, d.gtt_size, *d.gtt_used, d.gtt_size * 3 / 4};
		return give(&m, sizeof m);
	}
	case INFO_VRAM_USAGE:
	case INFO_VIS_VRAM_USAGE: {
		uint64_t used = *d.vram_used;
		return give(&used, 8);
	}
	case INFO_NUM_BYTES_MOVED:
		return give(&d.bytes_moved, 8);
	case INFO_NUM_EVICTIONS:
		return give(&d.num_evictions, 8);
	case INFO_GTT_USAGE: {
		uint64_t used = *d.gtt_used;
		return give(&used, 8);
	}
	case INFO_VRAM_LOST_COUNTER: {
		uint32_t z = 0;
		return give(&z, 4);
	}
	case INFO_GDS_CONFIG: {
		uint32_t z[6] = {};
		return give(z, sizeof z);
	}
	default:
		return -EINVAL;
	}
}

// ---- the ioctl handlers, one per ioctl as drm_ioctls[] / amdgpu_ioctls_kms[] ----

// What one render-node ioctl works on: the model with its lock held, the
// caller, the DRM file (kept alive by the chokepoint), the argument struct
// and the user address it came from.
struct DrmOps {
	ModelImpl &m;
	ModelImpl::Lock &lk;
	Caller &c;
	DrmFile &f;
	void *buf;
	uint64_t uarg;

	template <typename T> T &arg() { return *static_cast<T *>(buf); }

	// DRM core
	long version();
	long get_cap();
	long gem_close();
	long prime_handle_to_fd() { return m.drm_prime_to_fd(c, f, arg<PrimeHandle>(), uarg); }
	long prime_fd_to_handle() { return m.drm_fd_to_prime(c, f, arg<PrimeHandle>()); }
	long gem_change_handle();
	// amdgpu
	long gem_create();
	long gem_mmap();
	long ctx();
	long bo_list();
	long cs() { return m.drm_cs(c, f, arg<Cs>()); }
	long info() { return m.drm_info(c, f, arg<Info>()); }
	long gem_metadata();
	long gem_wait_idle();
	long gem_va();
	long wait_cs() { return m.drm_wait_cs(lk, f, arg<WaitCs>()); }
	long gem_op();
	long gem_userptr();
	long wait_fences();
	long vm();
	long gem_list_handles();

private:
	long ctx_query_state(abi::drm::Ctx &a);
	long ctx_stable_pstate(abi::drm::Ctx &a);
	int read_bo_list(const BoList &a, std::vector<std::shared_ptr<Bo>> *out);
	long gem_va_operation(const GemVa &a, uint64_t va, const std::shared_ptr<Bo> &bo);
	long gem_op_mapping_info(GemOp &a, Bo &bo);
	// WAIT_FENCES on `fs` (null: already signaled) until `dl`: whether
	// all (or any) signaled, the first that did, and the first error.
	static void wait_fence_set(const std::vector<std::shared_ptr<Fence>> &fs, bool wait_all,
				   std::optional<std::chrono::steady_clock::time_point> dl, bool *ok,
				   uint32_t *first, int *err);
};

long DrmOps::version()
{
	auto &a = arg<Version>();
	a.version_major = 3;
	a.version_minor = static_cast<int32_t>(f.dev->node->property("drm_minor_version", 57));
	a.version_patchlevel = 0;
	auto field = [&](uint64_t &len, uint64_t ptr, const char *s) -> int {
		uint64_t l = std::strlen(s);
		uint64_t n = std::min(l, len);
		len = l;
		if (n && ptr && c.write(ptr, s, n))
			return -EFAULT;
		return 0;
	};
	if (field(a.name_len, a.name, "amdgpu") || field(a.date_len, a.date, "20150101") ||
	    field(a.desc_len, a.desc, "AMD GPU"))
		return -EFAULT;
	return 0;
}

long DrmOps::get_cap()
{
	auto &a = arg<GetCap>();
	switch (a.capability) {
	case CAP_DUMB_BUFFER: a.value = 1; break;
	case 2: a.value = 1; break;			// VBLANK_HIGH_CRTC
	case 3: a.value = 24; break;			// DUMB_PREFERRED_DEPTH
	case 4: a.value = 1; break;			// DUMB_PREFER_SHADOW
	case CAP_PRIME: a.value = 3; break;		// IMPORT | EXPORT
	case CAP_TIMESTAMP_MONOTONIC: a.value = 1; break;
	case 7: a.value = 1; break;			// ASYNC_PAGE_FLIP
	case 8: case 9: a.value = 128; break;		// CURSOR_WIDTH/HEIGHT
	case CAP_ADDFB2_MODIFIERS: a.value = 1; break;
	case 0x11: case 0x12: a.value = 1; break;
	// The model has no syncobjs: say so rather than fail later.
	case CAP_SYNCOBJ: case CAP_SYNCOBJ_TIMELINE: a.value = 0; break;
	default: return -EINVAL;
	}
	return 0;
}

long DrmOps::gem_close()
{
	std::shared_ptr<Bo> bo = f.take_handle(arg<GemClose>().handle);
	if (!bo)
		return -EINVAL;
	f.vm.remove_gem_mappings(bo.get());
	return 0;
}

long DrmOps::gem_change_handle()
{
	auto &a = arg<GemChangeHandle>();
	if (a.new_handle > static_cast<uint32_t>(INT_MAX))
		return -EINVAL; // checked first (idr_alloc limit)
	if (!f.handles().count(a.handle))
		return -ENOENT;
	if (a.new_handle == a.handle)
		return 0;
	// idr_alloc(new, new + 1) on an idr based at 1: taken or 0.
	if (a.new_handle == 0 || f.handles().count(a.new_handle))
		return -ENOSPC;
	f.add_handle(a.new_handle, f.take_handle(a.handle));
	return 0;
}

long DrmOps::gem_create()
{
	auto &a = arg<GemCreate>();
	if (a.domain_flags & ~CREATE_SETTABLE_MASK)
		return -EINVAL;
	if (a.domains & ~DOMAIN_MASK)
		return -EINVAL;
	// amdgpu_is_tmz(): TMZ is off on the emulated ASICs (gfx908, gfx90a,
	// gfx942), so encrypted BOs are refused.
	if (a.domain_flags & CREATE_ENCRYPTED)
		return -EINVAL;
	if (a.bo_size == 0)
		return -EINVAL;
	BoType type = (a.domains & DOMAIN_VRAM) ? BoType::Vram
		    : (a.domains & DOMAIN_GTT) ? BoType::Gtt
		    : (a.domains & DOMAIN_CPU) ? BoType::Cpu
					       : BoType::Gtt;
	int err = 0;
	auto bo = m.new_bo(*f.dev, type, page_align(a.bo_size), &err, VramClient{c.identity().tgid, false, (a.domains & DOMAIN_GTT) != 0});
	if (!bo)
		return err;
	bo->alignment = a.alignment;
	bo->domains = a.domains;
	if (type == BoType::Vram && !bo->in_vram)
		bo->domains |= DOMAIN_GTT; // created by the retry with VRAM|GTT (eviction.cpp)
	bo->domain_flags = a.domain_flags | CREATE_VRAM_CLEARED | CREATE_ON_EVERY_BO; // "always clear VRAM"
	bo->fake_offset = f.dev->alloc_fake_offset(bo);
	uint32_t h = f.lowest_free_handle();
	f.add_handle(h, bo);
	std::memset(&a, 0, sizeof a);
	std::memcpy(&a, &h, 4);
	return 0;
}

long DrmOps::gem_mmap()
{
	auto &a = arg<GemMmap>();
	auto it = f.handles().find(static_cast<uint32_t>(a.handle_or_addr));
	if (it == f.handles().end())
		return -ENOENT;
	if (it->second->is_userptr() || (it->second->domain_flags & CREATE_NO_CPU_ACCESS))
		return -EPERM;
	a.handle_or_addr = it->second->fake_offset;
	return 0;
}

long DrmOps::gem_userptr()
{
	auto &a = arg<GemUserptr>();
	if ((a.addr | a.size) & (kPage - 1))
		return -EINVAL;
	if (a.size == 0)
		return -EINVAL;
	if (a.flags & ~(USERPTR_READONLY | USERPTR_ANONONLY | USERPTR_VALIDATE | USERPTR_REGISTER))
		return -EINVAL;
	if (!(a.flags & USERPTR_READONLY) && !(a.flags & USERPTR_REGISTER))
		return -EACCES;
	if (a.flags & USERPTR_VALIDATE) {
		uint8_t probe;
		if (c.read(a.addr, &probe, 1) || c.read(a.addr + a.size - 1, &probe, 1))
			return -EFAULT;
	}
	auto bo = std::make_shared<Bo>();
	bo->dev = f.dev;
	bo->type = BoType::Userptr;
	bo->size = a.size;
	bo->domains = DOMAIN_GTT;
	bo->domain_flags = CREATE_ON_EVERY_BO;
	bo->userptr_tgid = c.identity().tgid;
	bo->userptr_addr = a.addr;
	bo->userptr_flags = a.flags;
	bo->ledger = m.ledger_;
	bo->userptr_gem = true;
	m.ledger_->add(bo->userptr_tgid, bo->size, true);
	bo->fake_offset = f.dev->alloc_fake_offset(bo);
	uint32_t h = f.lowest_free_handle();
	f.add_handle(h, bo);
	a.handle = h;
	return 0;
}

long DrmOps::gem_va()
{
	auto &a = arg<GemVa>();
	if (a.va_address < kVaReservedBottom)
		return -EINVAL;
	if (a.va_address >= kHoleStart && a.va_address < kHoleEnd)
		return -EINVAL;
	uint64_t va = a.va_address & kHoleMask;
	if (va + a.map_size > kVmSize || va + a.map_size < va)
		return -EINVAL;
	// amdgpu_gem_va_ioctl: flags outside the valid set are accepted only
	// when they are all PRT flags.
	constexpr uint32_t prt_flags = VM_DELAY_UPDATE | VM_PAGE_PRT;
	if ((a.flags & ~(VA_VALID_FLAGS & ~VM_PAGE_PRT)) && (a.flags & ~prt_flags))
		return -EINVAL;
	if (a.operation < VA_OP_MAP || a.operation > VA_OP_REPLACE)
		return -EINVAL;
	std::shared_ptr<Bo> bo;
	if (a.operation != VA_OP_CLEAR && !(a.flags & VM_PAGE_PRT)) {
		auto it = f.handles().find(a.handle);
		if (it == f.handles().end())
			return -ENOENT;
		bo = it->second;
	}
	return gem_va_operation(a, va, bo);
}

long DrmOps::gem_va_operation(const GemVa &a, uint64_t va, const std::shared_ptr<Bo> &bo)
{
	auto aligned = [&] { return !((va | a.offset_in_bo | a.map_size) & (kPage - 1)); };
	switch (a.operation) {
	case VA_OP_MAP:
	case VA_OP_REPLACE: {
		// amdgpu_vm_verify_parameters: alignment, size 0, offset + size
		// wrapping (check_add_overflow), then the BO's end.
		if (!aligned() || a.map_size == 0 || a.offset_in_bo + a.map_size < a.offset_in_bo)
			return -EINVAL;
		if (bo && a.offset_in_bo + a.map_size > page_align(bo->size))
			return -EINVAL;
		if (a.operation == VA_OP_REPLACE)
			f.vm.clear(va, a.map_size);
		Mapping mp{va, a.map_size, a.offset_in_bo, a.flags, bo};
		return f.vm.insert(std::move(mp));
	}
	case VA_OP_UNMAP:
		if (!f.vm.remove(bo.get(), va))
			return -ENOENT;
		return 0;
	case VA_OP_CLEAR:
		// amdgpu_vm_bo_clear_mappings verifies as a MAP without a BO.
		if (!aligned() || a.map_size == 0)
			return -EINVAL;
		f.vm.clear(va, a.map_size);
		return 0;
	}
	return -EINVAL;
}

long DrmOps::gem_op()
{
	auto &a = arg<GemOp>();
	if (a.padding) // checked for every op, before the handle
		return -EINVAL;
	auto it = f.handles().find(a.handle);
	if (it == f.handles().end())
		return -ENOENT;
	Bo &bo = *it->second;
	switch (a.op) {
	case GEM_OP_GET_GEM_CREATE_INFO: {
		GemCreate info{bo.size, page_align(bo.alignment), bo.domains, bo.domain_flags};
		if (c.write(a.value, &info, sizeof info))
			return -EFAULT;
		return 0;
	}
	case GEM_OP_SET_PLACEMENT: {
		if (bo.import_of && (a.value & DOMAIN_VRAM))
			return -EINVAL;
		if (bo.is_userptr())
			return -EPERM;
		uint64_t dom = a.value & (DOMAIN_VRAM | DOMAIN_GTT | DOMAIN_CPU);
		if (!dom)
			return -EINVAL;
		bo.domains = dom;
		return 0;
	}
	case GEM_OP_GET_MAPPING_INFO:
		return gem_op_mapping_info(a, bo);
	default:
		return -EINVAL;
	}
}

long DrmOps::gem_op_mapping_info(GemOp &a, Bo &bo)
{
	auto maps = f.vm.of_bo(&bo);
	std::vector<GemVmEntry> e;
	// amdgpu_gem_op_ioctl (amdgpu_gem.c): `flags` are the mapping's, which
	// amdgpu_vm_bo_map keeps as GEM_VA's AMDGPU_VM_PAGE_* flags since Linux
	// 6.18 ("drm/amdgpu: rework how PTE flags are generated v3", merged with
	// GET_MAPPING_INFO so that CRIU can recreate the mapping with them).
	for (auto &mp : maps)
		e.push_back(GemVmEntry{mp.start, mp.size, mp.offset, mp.flags});
	// All or nothing: entries are copied only when they all fit.
	// The count is set (and copied back) even when the copy faults.
	const bool fits = !e.empty() && e.size() <= a.num_entries;
	a.num_entries = static_cast<uint32_t>(e.size());
	if (fits && c.write(a.value, e.data(), e.size() * sizeof(GemVmEntry)))
		return -EFAULT;
	return 0;
}

long DrmOps::gem_list_handles()
{
	auto &a = arg<GemListHandles>();
	uint32_t count = static_cast<uint32_t>(f.handles().size());
	if (a.num_entries < count) {
		a.num_entries = count;
		return 0;
	}
	std::vector<GemListHandlesEntry> e;
	for (auto &[h, bo] : f.handles())
		// alignment is TTM's page_alignment: in pages.
		e.push_back(GemListHandlesEntry{h, bo->import_of ? LIST_HANDLES_IS_IMPORT : 0u, bo->size,
						bo->domains, bo->domain_flags & CREATE_SETTABLE_MASK,
						page_align(bo->alignment) / kPage});
	a.num_entries = count; // copied back even when the copy faults
	if (!e.empty() && c.write(a.entries, e.data(), e.size() * sizeof(GemListHandlesEntry)))
		return -EFAULT;
	return 0;
}

long DrmOps::gem_metadata()
{
	auto &a = arg<GemMetadata>();
	auto it = f.handles().find(a.handle);
	if (it == f.handles().end())
		return -ENOENT;
	Bo &bo = *it->second;
	if (a.op == 1) { // SET_METADATA: amdgpu_bo_set_tiling_flags + _set_metadata
		if (a.data_size_bytes > sizeof a.data)
			return -EINVAL;
		bo.md_tiling = a.tiling_info;
		if (a.data_size_bytes == 0) {
			bo.md_data.clear(); // the flags stay as they were
			return 0;
		}
		const auto *bytes = reinterpret_cast<const uint8_t *>(a.data);
		bo.md_data.assign(bytes, bytes + a.data_size_bytes);
		bo.md_flags = a.flags;
		return 0;
	}
	if (a.op == 2) { // GET_METADATA: the exact size set; data past it is left as the caller sent it
		a.flags = bo.md_flags;
		a.tiling_info = bo.md_tiling;
		a.data_size_bytes = static_cast<uint32_t>(bo.md_data.size());
		if (!bo.md_data.empty())
			std::memcpy(a.data, bo.md_data.data(), bo.md_data.size());
		return 0;
	}
	// amdgpu_gem_metadata_ioctl has no else: another op returns what
	// amdgpu_bo_reserve did, 0, and changes nothing.
	return 0;
}

long DrmOps::gem_wait_idle()
{
	auto &a = arg<GemWaitIdle>();
	auto it = f.handles().find(a.handle);
	if (it == f.handles().end())
		return -ENOENT;
	std::shared_ptr<Bo> bo = it->second;
	auto dl = deadline_of(a.timeout);
	lk.unlock();
	while (bo->busy.load() > 0 && (!dl || std::chrono::steady_clock::now() < *dl))
		std::this_thread::sleep_for(std::chrono::microseconds(200));
	lk.lock();
	uint32_t out[2] = {bo->busy.load() > 0 ? 1u : 0u, static_cast<uint32_t>(bo->domains)};
	std::memset(&a, 0, sizeof a);
	std::memcpy(&a, out, sizeof out);
	return 0;
}

long DrmOps::ctx()
{
	auto &a = arg<abi::drm::Ctx>();
	switch (a.op) {
	case CTX_OP_ALLOC: {
		if (a.priority < -1023 || a.priority > 1023)
			return -EINVAL;
		uint32_t id = 1;
		while (f.ctxs.count(id))
			++id;
		f.ctxs[id].priority = a.priority;
		f.ctxs[id].stable_pstate = pstate_of_level(read_dpm_level(m.sysfs_root_, *f.dev));
		a.op = id; // out.alloc.ctx_id overlays `op`
		return 0;
	}
	case CTX_OP_FREE: {
		auto it = f.ctxs.find(a.ctx_id);
		if (it == f.ctxs.end())
			return -EINVAL;
		(void)set_stable_pstate(m.sysfs_root_, f, a.ctx_id, it->second.stable_pstate);
		if (f.dev->pstate_ctx == std::pair{f.key, a.ctx_id})
			f.dev->pstate_ctx.reset(); // a freed context holds nothing
		f.ctxs.erase(it);
		return 0;
	}
	case CTX_OP_QUERY_STATE:
	case CTX_OP_QUERY_STATE2:
		return ctx_query_state(a);
	case CTX_OP_GET_STABLE_PSTATE:
	case CTX_OP_SET_STABLE_PSTATE:
		return ctx_stable_pstate(a);
	default:
		return -EINVAL;
	}
}

// AMDGPU_CTX_OP_GET/SET_STABLE_PSTATE (amdgpu_ctx_ioctl): GET takes no
// flags; SET takes a pstate up to PEAK. Unknown context: EINVAL.
long DrmOps::ctx_stable_pstate(abi::drm::Ctx &a)
{
	const bool set = a.op == CTX_OP_SET_STABLE_PSTATE;
	if (!set && a.flags)
		return -EINVAL;
	const uint32_t want = a.flags & CTX_STABLE_PSTATE_FLAGS_MASK;
	if (set && ((a.flags & ~CTX_STABLE_PSTATE_FLAGS_MASK) || want > CTX_STABLE_PSTATE_PEAK))
		return -EINVAL;
	if (!f.ctxs.count(a.ctx_id))
		return -EINVAL;
	if (set)
		return set_stable_pstate(m.sysfs_root_, f, a.ctx_id, want);
	const uint32_t now = pstate_of_level(read_dpm_level(m.sysfs_root_, *f.dev));
	std::memset(&a, 0, sizeof a);
	std::memcpy(&a, &now, 4); // out.pstate.flags
	return 0;
}

long DrmOps::ctx_query_state(abi::drm::Ctx &a)
{
	auto it = f.ctxs.find(a.ctx_id);
	if (it == f.ctxs.end())
		return -EINVAL;
	const bool guilty = it->second.guilty->load();
	const uint32_t op = a.op;
	std::memset(&a, 0, sizeof a);
	uint64_t flags = 0;
	uint32_t reset_status = 0;
	if (op == CTX_OP_QUERY_STATE2)
		flags = guilty ? 3 : 0; // RESET | GUILTY
	else
		reset_status = guilty ? 1 : 0; // AMDGPU_CTX_GUILTY_RESET
	std::memcpy(&a, &flags, 8);
	std::memcpy(reinterpret_cast<uint8_t *>(&a) + 12, &reset_status, 4);
	return 0;
}

int DrmOps::read_bo_list(const BoList &a, std::vector<std::shared_ptr<Bo>> *out)
{
	if (a.bo_number > 128 * 1024)
		return -EINVAL;
	size_t esz = std::min<size_t>(a.bo_info_size, sizeof(BoListEntry));
	for (uint32_t i = 0; i < a.bo_number; ++i) {
		BoListEntry e{};
		if (esz && c.read(a.bo_info_ptr + static_cast<uint64_t>(i) * a.bo_info_size, &e, esz))
			return -EFAULT;
		auto it = f.handles().find(e.bo_handle);
		if (it == f.handles().end())
			return -ENOENT;
		out->push_back(it->second);
	}
	return 0;
}

long DrmOps::bo_list()
{
	auto &a = arg<BoList>();
	switch (a.operation) {
	case BO_LIST_CREATE: {
		std::vector<std::shared_ptr<Bo>> list;
		if (int e = read_bo_list(a, &list))
			return e;
		uint32_t id = 1;
		while (f.bo_lists.count(id))
			++id;
		f.bo_lists[id] = std::move(list);
		std::memset(&a, 0, sizeof a);
		a.operation = id; // out.list_handle overlays `operation`
		return 0;
	}
	case BO_LIST_DESTROY:
		f.bo_lists.erase(a.list_handle);
		return 0;
	case BO_LIST_UPDATE: {
		auto it = f.bo_lists.find(a.list_handle);
		if (it == f.bo_lists.end())
			return -ENOENT;
		std::vector<std::shared_ptr<Bo>> list;
		if (int e = read_bo_list(a, &list))
			return e;
		it->second = std::move(list);
		uint32_t id = a.list_handle;
		std::memset(&a, 0, sizeof a);
		a.operation = id;
		return 0;
	}
	default:
		return -EINVAL;
	}
}

void DrmOps::wait_fence_set(const std::vector<std::shared_ptr<Fence>> &fs, bool wait_all,
			    std::optional<std::chrono::steady_clock::time_point> dl, bool *ok, uint32_t *first,
			    int *err)
{
	if (wait_all) {
		for (auto &fe : fs)
			if (fe && !wait_fence(*fe, dl))
				*ok = false;
			else if (fe && fe->error && !*err)
				*err = fe->error;
		return;
	}
	*ok = false;
	for (;;) {
		for (uint32_t i = 0; i < fs.size() && !*ok; ++i) {
			if (!fs[i]) {
				*ok = true;
				*first = i;
			} else {
				std::lock_guard fl(fs[i]->mu);
				if (fs[i]->done) {
					*ok = true;
					*first = i;
					*err = fs[i]->error;
				}
			}
		}
		if (*ok || (dl && std::chrono::steady_clock::now() >= *dl))
			return;
		std::this_thread::sleep_for(std::chrono::microseconds(200));
	}
}

long DrmOps::wait_fences()
{
	auto &a = arg<WaitFences>();
	if (a.fence_count == 0 || a.fence_count > 1024)
		return -EINVAL;
	std::vector<abi::drm::Fence> in(a.fence_count);
	if (c.read(a.fences, in.data(), in.size() * sizeof(abi::drm::Fence)))
		return -EFAULT;
	std::vector<std::shared_ptr<Fence>> fs;
	for (auto &x : in) {
		auto ci = f.ctxs.find(x.ctx_id);
		if (ci == f.ctxs.end())
			return -EINVAL;
		auto en = ci->second.entities.find({x.ip_type, x.ip_instance, x.ring});
		uint64_t next = en == ci->second.entities.end() ? 1 : en->second.next_seq;
		if (x.seq_no >= next && x.seq_no)
			return -EINVAL;
		std::shared_ptr<Fence> fe;
		if (en != ci->second.entities.end()) {
			auto it = en->second.fences.find(x.seq_no);
			if (it != en->second.fences.end())
				fe = it->second;
		}
		fs.push_back(fe);
	}
	auto dl = deadline_of(a.timeout_ns);
	uint32_t first = 0;
	bool ok = true;
	int err = 0;
	lk.unlock();
	wait_fence_set(fs, a.wait_all != 0, dl, &ok, &first, &err);
	lk.lock();
	if (err)
		return err;
	uint32_t out[2] = {ok ? 1u : 0u, first};
	std::memset(&a, 0, sizeof a);
	std::memcpy(&a, out, sizeof out);
	return 0;
}

long DrmOps::vm()
{
	auto &a = arg<abi::drm::Vm>();
	if (a.op != 1 && a.op != 2)
		return -EINVAL;
	std::memset(&a, 0, sizeof a);
	return 0;
}

namespace {

// drm_ioctls[] (the core ioctls a render client reaches) and
// amdgpu_ioctls_kms[] (at kCommandBase + n) in one table indexed by the
// ioctl number. The kernel's own copy directions; the core ioctls without
// DRM_RENDER_ALLOW are listed (a render node refuses them: -EACCES), the
// numbers without a name are unknown (-EINVAL). FENCE_TO_HANDLE has no
// handler (no syncobjs): -EINVAL.
constexpr auto kDrmIoctls = [] {
	std::array<DrmIoctlDesc, 256> t{};
	constexpr unsigned W = abi::kIocWrite;
	constexpr unsigned render = kIoctlRenderAllow, pub = kIoctlPublishes;
	auto core = [&](unsigned nr, const char *name, long (DrmOps::*h)(), unsigned flags,
			unsigned dir = abi::kIocRead | abi::kIocWrite) {
		t[nr] = DrmIoctlDesc{name, dir, flags, h};
	};
	auto amdgpu = [&](unsigned n, const char *name, long (DrmOps::*h)(), unsigned flags = 0,
			  unsigned dir = abi::kIocRead | abi::kIocWrite) {
		t[kCommandBase + n] = DrmIoctlDesc{name, dir, flags | render, h};
	};
	core(VERSION, "DRM_IOCTL_VERSION", &DrmOps::version, render);
	core(GET_UNIQUE, "DRM_IOCTL_GET_UNIQUE", nullptr, 0);
	core(GET_MAGIC, "DRM_IOCTL_GET_MAGIC", nullptr, 0);
	core(GET_CLIENT, "DRM_IOCTL_GET_CLIENT", nullptr, 0);
	core(GET_STATS, "DRM_IOCTL_GET_STATS", nullptr, 0);
	core(SET_VERSION, "DRM_IOCTL_SET_VERSION", nullptr, 0);
	core(GEM_CLOSE, "DRM_IOCTL_GEM_CLOSE", &DrmOps::gem_close, render | pub, W);
	core(GEM_FLINK, "DRM_IOCTL_GEM_FLINK", nullptr, 0);
	core(GEM_OPEN, "DRM_IOCTL_GEM_OPEN", nullptr, 0);
	core(GET_CAP, "DRM_IOCTL_GET_CAP", &DrmOps::get_cap, render);
	core(SET_CLIENT_CAP, "DRM_IOCTL_SET_CLIENT_CAP", nullptr, 0);
	core(AUTH_MAGIC, "DRM_IOCTL_AUTH_MAGIC", nullptr, 0);
	core(PRIME_HANDLE_TO_FD, "DRM_IOCTL_PRIME_HANDLE_TO_FD", &DrmOps::prime_handle_to_fd, render);
	core(PRIME_FD_TO_HANDLE, "DRM_IOCTL_PRIME_FD_TO_HANDLE", &DrmOps::prime_fd_to_handle, render);
	core(GEM_CHANGE_HANDLE, "DRM_IOCTL_GEM_CHANGE_HANDLE", &DrmOps::gem_change_handle, render);
	amdgpu(GEM_CREATE, "DRM_IOCTL_AMDGPU_GEM_CREATE", &DrmOps::gem_create, pub);
	amdgpu(GEM_MMAP, "DRM_IOCTL_AMDGPU_GEM_MMAP", &DrmOps::gem_mmap);
	amdgpu(CTX, "DRM_IOCTL_AMDGPU_CTX", &DrmOps::ctx);
	amdgpu(BO_LIST, "DRM_IOCTL_AMDGPU_BO_LIST", &DrmOps::bo_list);
	amdgpu(CS, "DRM_IOCTL_AMDGPU_CS", &DrmOps::cs);
	amdgpu(INFO, "DRM_IOCTL_AMDGPU_INFO", &DrmOps::info, 0, W);
	amdgpu(GEM_METADATA, "DRM_IOCTL_AMDGPU_GEM_METADATA", &DrmOps::gem_metadata);
	amdgpu(GEM_WAIT_IDLE, "DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE", &DrmOps::gem_wait_idle);
	amdgpu(GEM_VA, "DRM_IOCTL_AMDGPU_GEM_VA", &DrmOps::gem_va, 0, W);
	amdgpu(WAIT_CS, "DRM_IOCTL_AMDGPU_WAIT_CS", &DrmOps::wait_cs);
	amdgpu(GEM_OP, "DRM_IOCTL_AMDGPU_GEM_OP", &DrmOps::gem_op);
	amdgpu(GEM_USERPTR, "DRM_IOCTL_AMDGPU_GEM_USERPTR", &DrmOps::gem_userptr);
	amdgpu(WAIT_FENCES, "DRM_IOCTL_AMDGPU_WAIT_FENCES", &DrmOps::wait_fences);
	amdgpu(VM, "DRM_IOCTL_AMDGPU_VM", &DrmOps::vm);
	amdgpu(FENCE_TO_HANDLE, "DRM_IOCTL_AMDGPU_FENCE_TO_HANDLE", nullptr);
	amdgpu(SCHED, "DRM_IOCTL_AMDGPU_SCHED", nullptr, kIoctlMaster, W);
	amdgpu(GEM_LIST_HANDLES, "DRM_IOCTL_AMDGPU_GEM_LIST_HANDLES", &DrmOps::gem_list_handles);
	return t;
}();

} // namespace

const DrmIoctlDesc *drm_ioctl_desc(unsigned nr)
{
	if (nr >= kDrmIoctls.size() || !kDrmIoctls[nr].name)
		return nullptr;
	return &kDrmIoctls[nr];
}

long ModelImpl::drm_ioctl(Lock &lk, Caller &c, const std::shared_ptr<DrmFile> &f, const DrmIoctlDesc &d,
			  void *buf, uint64_t uarg)
{
	// The render-node check is done by the chokepoint; a DRM_MASTER call
	// is refused once its argument has been read, as drm_ioctl_permit.
	if (d.flags & kIoctlMaster)
		return -EACCES;
	if (!d.handler)
		return -EINVAL;
	DrmOps ops{*this, lk, c, *f, buf, uarg};
	return (ops.*d.handler)();
}

} // namespace kfdemu::detail
