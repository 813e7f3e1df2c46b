// SPDX-License-Identifier: GPL-2.0-only
//
// AMDKFD_IOC_SVM and AMDKFD_IOC_SMI_EVENTS, as amdkfd's kfd_svm.c and
// kfd_smi_events.c behave to a client.
//
// SVM: a process's SVM ranges are page intervals of its own address space
// with attributes. SET_ATTR (svm_range_set_attr) checks the attributes,
// then that every page of [start, start + size) is the process's memory
// and no BO mapped to a GPU overlaps it; then, as svm_range_add, every
// existing range it overlaps is updated (split first when it reaches
// outside), except one that already has the attributes and is mapped to a
// GPU, and each gap becomes new ranges, cut at multiples of the largest
// range (1/32 of the smallest VRAM, 2 MiB .. 1 GiB, a power of two).
// Ranges are never merged. Every updated range then goes where its
// prefetch location says (svm_range_trigger_migration): system memory, or
// the VRAM of that GPU, unless a GPU that may access it is not in that
// GPU's XGMI hive (then system memory). GET_ATTR (svm_range_get_attr)
// gives the view over every range [start, start + size) overlaps: a
// location only when all have the same defined one, the flags all have
// (SET_FLAGS) and none has (CLR_FLAGS), the smallest granularity, and per
// GPU ACCESS / ACCESS_IN_PLACE only when every range grants it.
//
// On the GPUs (as kfd_svm.c and kfd_migrate.c): a range is mapped in the
// page tables of the GPUs that may access it when SET_ATTR validates it
// (svm_range_validate_and_map: with XNACK off every GPU with ACCESS or
// ACCESS_IN_PLACE; with XNACK on only those in place, or all with
// GPU_ALWAYS_MAPPED). SDMA, CP and AQL queues reach a mapped range through
// resolve_va (svm_gpu_access); an access to an unmapped one is a VM fault
// with XNACK off, and with XNACK on a recoverable fault handled as
// svm_range_restore_pages does: a range made for unregistered memory
// (2 MiB aligned, cut at the process's mapping, its neighbours and the
// GPU's BO mappings), the GPU's access checked (none: the fault stays a VM fault),
// the range migrated to its best restore location, then mapped there.
// Migration (a prefetch, a GPU fault, TTM's eviction under VRAM pressure)
// moves the range's VRAM charge and sends SMI events MIGRATE_START/END;
// a GPU fault PAGE_FAULT_START/END; an unmap UNMAP_FROM_GPU. Eviction:
// when VRAM is needed and moving BOs to GTT does not free enough, ranges
// of other processes go to system memory (with XNACK on their GPU
// mappings go too, and the next fault brings them back to VRAM).
//
// What the model does not do: no data moves: a range's bytes are the
// process's memory wherever it is "resident", which is what its CPU and
// its GPUs read and write (only the VRAM is accounted); so no CPU page
// fault migrates a VRAM range back (svm_migrate_to_ram), and the CPU sees
// a GPU's writes at once. Ranges lose their pages when the process
// unmaps them through the shim's munmap (svm_unmap: the shim tells of an
// munmap in a span it gave SET_ATTR, or of any with XNACK on; glibc's own
// munmap calls inside malloc, mremap and MAP_FIXED mappings over a range
// are not seen). "The process's memory"
// is memory the model can read (the kernel also takes PROT_NONE
// mappings, and refuses device mappings, which the model cannot tell
// apart).
//
// SMI_EVENTS: the fd of kfd_smi_event_open: one end of a socket pair
// whose other end the process's context keeps. A write (the event mask,
// 8 bytes) is taken when the next event is sent; each event is one
// record, the kernel's text line "<event> <fields>", for clients of the
// event's GPU whose mask has it and that belong to the event's process
// (or, with KFD_SMI_EVENT_ALL_PROCESS, hold CAP_SYS_ADMIN or
// CAP_CHECKPOINT_RESTORE: the transport's capability check). A read finds
// none (EAGAIN) until one comes; a full socket drops events as the
// kernel's full fifo does.
#include "model/state.h"

#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace kfdemu::detail {

using namespace abi::kfd;

VramCharge::VramCharge(Device &d, uint64_t bytes) : dev_(&d), used_(d.vram_used), kfd_(d.kfd_vram_used), bytes_(bytes)
{
	*used_ += bytes;
	*kfd_ += bytes;
}

VramCharge::VramCharge(VramCharge &&o) noexcept
	: dev_(o.dev_), used_(std::move(o.used_)), kfd_(std::move(o.kfd_)), bytes_(o.bytes_)
{
	o.bytes_ = 0;
	o.dev_ = nullptr;
}

VramCharge &VramCharge::operator=(VramCharge &&o) noexcept
{
	if (this != &o) {
		release();
		dev_ = o.dev_;
		used_ = std::move(o.used_);
		kfd_ = std::move(o.kfd_);
		bytes_ = o.bytes_;
		o.bytes_ = 0;
		o.dev_ = nullptr;
	}
	return *this;
}

VramCharge VramCharge::split(uint64_t bytes)
{
	VramCharge c;
	if (!bytes_)
		return c;
	c.dev_ = dev_;
	c.used_ = used_;
	c.kfd_ = kfd_;
	c.bytes_ = std::min(bytes, bytes_);
	bytes_ -= c.bytes_;
	return c;
}

void VramCharge::release()
{
	if (used_ && bytes_) {
		*used_ -= bytes_;
		*kfd_ -= bytes_;
	}
	bytes_ = 0;
	used_.reset();
	kfd_.reset();
	dev_ = nullptr;
}

namespace {

// kfd_process_gpuidx_from_gpuid: the pdd index of user gpu_id, or -1
// (also beyond the 64 GPUs a range's access bits can name).
int gpuidx(const KfdProcess &p, uint32_t gpu_id)
{
	for (size_t i = 0; i < p.pdds.size() && i < 64; ++i)
		if (p.pdds[i].user_gpu_id == gpu_id)
			return static_cast<int>(i);
	return -1;
}

bool bit(uint64_t bits, int i) { return i >= 0 && (bits >> i) & 1; }

// svm_range_check_attr. Every GPU of the machine supports SVM (the
// topology's capability bit says so for each).
int check_attrs(const KfdProcess &p, const std::vector<SvmAttribute> &attrs)
{
	for (const auto &a : attrs) {
		bool gpu = false;
		switch (a.type) {
		case SVM_ATTR_PREFERRED_LOC:
			gpu = a.value != SVM_LOCATION_SYSMEM && a.value != SVM_LOCATION_UNDEFINED;
			break;
		case SVM_ATTR_PREFETCH_LOC:
			gpu = a.value != SVM_LOCATION_SYSMEM; // UNDEFINED is no GPU: EINVAL
			break;
		case SVM_ATTR_ACCESS:
		case SVM_ATTR_ACCESS_IN_PLACE:
		case SVM_ATTR_NO_ACCESS:
			gpu = true;
			break;
		case SVM_ATTR_SET_FLAGS:
		case SVM_ATTR_CLR_FLAGS:
		case SVM_ATTR_GRANULARITY:
			break;
		default:
			return -EINVAL;
		}
		if (gpu && gpuidx(p, a.value) < 0)
			return -EINVAL;
	}
	return 0;
}

// svm_range_is_same_attrs
bool same_attrs(const KfdProcess &p, const SvmRange &r, const std::vector<SvmAttribute> &attrs)
{
	for (const auto &a : attrs) {
		const int i = gpuidx(p, a.value);
		switch (a.type) {
		case SVM_ATTR_PREFERRED_LOC:
			if (r.preferred_loc != a.value)
				return false;
			break;
		case SVM_ATTR_PREFETCH_LOC:
			return false; // a prefetch always migrates
		case SVM_ATTR_ACCESS:
			if (!bit(r.access, i))
				return false;
			break;
		case SVM_ATTR_ACCESS_IN_PLACE:
			if (!bit(r.aip, i))
				return false;
			break;
		case SVM_ATTR_NO_ACCESS:
			if (bit(r.access, i) || bit(r.aip, i))
				return false;
			break;
		case SVM_ATTR_SET_FLAGS:
			if ((r.flags & a.value) != a.value)
				return false;
			break;
		case SVM_ATTR_CLR_FLAGS:
			if (r.flags & a.value)
				return false;
			break;
		case SVM_ATTR_GRANULARITY:
			if (r.granularity != a.value)
				return false;
			break;
		default:
			break;
		}
	}
	return true;
}

// svm_range_apply_attrs; *update_mapping as the kernel's.
void apply_attrs(const KfdProcess &p, SvmRange &r, const std::vector<SvmAttribute> &attrs, bool *update_mapping)
{
	for (const auto &a : attrs) {
		switch (a.type) {
		case SVM_ATTR_PREFERRED_LOC:
			r.preferred_loc = a.value;
			break;
		case SVM_ATTR_PREFETCH_LOC:
			r.prefetch_loc = a.value;
			break;
		case SVM_ATTR_ACCESS:
		case SVM_ATTR_ACCESS_IN_PLACE:
		case SVM_ATTR_NO_ACCESS: {
			if (!p.xnack)
				*update_mapping = true;
			const uint64_t m = uint64_t{1} << gpuidx(p, a.value);
			r.access = a.type == SVM_ATTR_ACCESS ? r.access | m : r.access & ~m;
			r.aip = a.type == SVM_ATTR_ACCESS_IN_PLACE ? r.aip | m : r.aip & ~m;
			break;
		}
		case SVM_ATTR_SET_FLAGS:
			*update_mapping = true;
			r.flags |= a.value;
			break;
		case SVM_ATTR_CLR_FLAGS:
			*update_mapping = true;
			r.flags &= ~a.value;
			break;
		case SVM_ATTR_GRANULARITY:
			r.granularity = std::min<uint32_t>(a.value, 0x3f);
			break;
		default:
			break;
		}
	}
}

bool same_hive(const Device &a, const Device &b)
{
	if (&a == &b)
		return true;
	const uint64_t ha = a.node->property("hive_id"), hb = b.node->property("hive_id");
	return ha && ha == hb;
}

// svm_range_best_prefetch_location: 0 (system memory), UNDEFINED, or the
// user gpu_id of the GPU whose VRAM the range goes to.
uint32_t best_location(const KfdProcess &p, const SvmRange &r)
{
	const uint32_t loc = r.prefetch_loc;
	if (loc == SVM_LOCATION_SYSMEM || loc == SVM_LOCATION_UNDEFINED)
		return loc;
	const int bi = gpuidx(p, loc);
	if (bi < 0)
		return SVM_LOCATION_SYSMEM;
	const uint64_t gpus = p.xnack ? r.aip : (r.access | r.aip);
	for (size_t i = 0; i < p.pdds.size() && i < 64; ++i)
		if (bit(gpus, static_cast<int>(i)) && !same_hive(*p.pdds[i].dev, *p.pdds[bi].dev))
			return SVM_LOCATION_SYSMEM;
	return loc;
}

// svm_range_validate_and_map: the GPUs a range is mapped on, those that
// may access it (with XNACK on, only those in place, unless always mapped).
uint64_t mapped_on(const KfdProcess &p, const SvmRange &r)
{
	const bool all = !p.xnack || (r.flags & SVM_FLAG_GPU_ALWAYS_MAPPED);
	return all ? (r.access | r.aip) : r.aip;
}

// The largest new range in pages (max_svm_range_pages): per GPU 1/32 of
// its VRAM, clamped to 2 MiB .. 1 GiB and rounded down to a power of two;
// the smallest of the GPUs.
uint64_t max_range_pages(const std::vector<Pdd> &pdds)
{
	uint64_t m = 0;
	for (const auto &pdd : pdds) {
		const uint64_t pages = std::bit_floor(std::clamp<uint64_t>(pdd.dev->vram_size >> 17, 1u << 9, 1u << 18));
		m = m ? std::min(m, pages) : pages;
	}
	return m ? m : 1u << 9;
}

// The piece of r from page `at` on, cut off r (svm_range_split): r keeps
// [r.start, at - 1] with its share of the VRAM charge.
SvmRange split_at(SvmRange &r, uint64_t at)
{
	SvmRange tail;
	tail.start = at;
	tail.last = r.last;
	tail.preferred_loc = r.preferred_loc;
	tail.prefetch_loc = r.prefetch_loc;
	tail.flags = r.flags;
	tail.granularity = r.granularity;
	tail.access = r.access;
	tail.aip = r.aip;
	tail.mapped = r.mapped;
	tail.vram = r.vram.split(tail.npages() * kPage);
	r.last = at - 1;
	return tail;
}

} // namespace

bool ModelImpl::svm_overlaps(const KfdProcess &p, uint64_t start, uint64_t last)
{
	auto it = p.svm.upper_bound(last);
	return it != p.svm.begin() && std::prev(it)->second.last >= start;
}

// svm_range_is_valid, as far as the model can tell: every page is memory
// of the process (the model reads it), and no BO mapped to a GPU of the
// process covers any of it (EADDRINUSE).
static int range_is_valid(ProcessMemory &pm, const KfdProcess &p, uint64_t start, uint64_t npages)
{
	static constexpr uint64_t kChunk = 1 << 20;
	std::vector<uint8_t> scratch(kChunk);
	const uint64_t end = (start + npages) * kPage;
	for (uint64_t a = start * kPage; a < end; a += kChunk)
		if (pm.read(p.tgid, a, scratch.data(), std::min(kChunk, end - a)) != 0)
			return -EFAULT;
	for (const auto &[bo, on] : p.mapped_on)
		if (!on.empty() && bo->va < end && bo->va + bo->size > start * kPage)
			return -EADDRINUSE;
	return 0;
}

int ModelImpl::svm_set_attr(KfdProcess &p, uint64_t start, uint64_t npages, const std::vector<SvmAttribute> &attrs)
{
	if (int e = check_attrs(p, attrs))
		return e;
	if (int e = range_is_valid(*pm_, p, start, npages))
		return e;

	// svm_range_add: the ranges to update, by start.
	const uint64_t last = start + npages - 1;
	const uint64_t max_pages = max_range_pages(p.pdds);
	std::vector<uint64_t> update;
	auto add_new = [&](uint64_t s, uint64_t l) {
		while (s <= l) {
			const uint64_t e = std::min(l, (s + max_pages) / max_pages * max_pages - 1);
			SvmRange r;
			r.start = s;
			r.last = e;
			if (p.xnack)
				r.access = p.pdds.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << p.pdds.size()) - 1;
			p.svm.emplace(s, std::move(r));
			update.push_back(s);
			s = e + 1;
		}
	};
	std::vector<uint64_t> overlapping;
	{
		auto it = p.svm.upper_bound(start);
		if (it != p.svm.begin() && std::prev(it)->second.last >= start)
			--it;
		for (; it != p.svm.end() && it->first <= last; ++it)
			overlapping.push_back(it->first);
	}
	uint64_t cur = start;
	for (uint64_t key : overlapping) {
		SvmRange &r = p.svm.at(key);
		const uint64_t r_start = r.start, r_last = r.last;
		const uint64_t next = std::min(r_last, last) + 1;
		if (same_attrs(p, r, attrs) && r.mapped && (r.mapped & mapped_on(p, r)) == mapped_on(p, r)) {
			// nothing to do
		} else if (r_start < start || r_last > last) {
			// Split off what lies outside; the middle is updated.
			uint64_t mid = r_start;
			if (r_start < start) {
				SvmRange m = split_at(r, start);
				mid = m.start;
				p.svm.emplace(mid, std::move(m));
			}
			SvmRange &mr = p.svm.at(mid);
			if (r_last > last) {
				SvmRange t = split_at(mr, last + 1);
				p.svm.emplace(t.start, std::move(t));
			}
			update.push_back(mid);
		} else {
			update.push_back(r_start);
		}
		if (r_start > cur)
			add_new(cur, r_start - 1);
		cur = next;
	}
	if (cur <= last)
		add_new(cur, last);

	bool update_mapping = false;
	for (uint64_t key : update)
		apply_attrs(p, p.svm.at(key), attrs, &update_mapping);

	// Migrations (and the mappings they imply); a failure leaves the
	// attributes applied, as the kernel's, and the last error is returned.
	int ret = 0;
	for (uint64_t key : update) {
		SvmRange &r = p.svm.at(key);
		const uint32_t best = best_location(p, r);
		bool migrated = false;
		if (best != SVM_LOCATION_UNDEFINED) {
			Device *to = best == SVM_LOCATION_SYSMEM ? nullptr : p.pdd_by_user_id(best)->dev;
			migrated = r.vram.device() != to;
			if (int e = svm_migrate(p, r, to, MIGRATE_TRIGGER_PREFETCH)) {
				ret = e;
				continue;
			}
		}
		if (!migrated && !update_mapping)
			continue;
		r.mapped = mapped_on(p, r);
	}
	return ret;
}

int ModelImpl::svm_get_attr(KfdProcess &p, uint64_t start, uint64_t npages, std::vector<SvmAttribute> &attrs,
			    bool check_memory)
{
	if (check_memory)
		if (int e = range_is_valid(*pm_, p, start, npages))
			return e;
	bool get_pref = false, get_prefetch = false, get_access = false, get_flags = false, get_gran = false;
	for (const auto &a : attrs) {
		switch (a.type) {
		case SVM_ATTR_PREFERRED_LOC: get_pref = true; break;
		case SVM_ATTR_PREFETCH_LOC: get_prefetch = true; break;
		case SVM_ATTR_ACCESS: get_access = true; break;
		case SVM_ATTR_SET_FLAGS:
		case SVM_ATTR_CLR_FLAGS: get_flags = true; break;
		case SVM_ATTR_GRANULARITY: get_gran = true; break;
		default: return -EINVAL; // ACCESS_IN_PLACE and NO_ACCESS too
		}
	}
	const uint64_t last = start + npages - 1;
	const uint64_t supported = p.pdds.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << p.pdds.size()) - 1;
	uint32_t location = SVM_LOCATION_UNDEFINED, prefetch = SVM_LOCATION_UNDEFINED;
	uint32_t flags_and = 0xffffffff, flags_or = 0, granularity = 0xff;
	uint64_t access = supported, aip = supported;
	auto it = p.svm.upper_bound(start);
	if (it != p.svm.begin() && std::prev(it)->second.last >= start)
		--it;
	if (it == p.svm.end() || it->first > last) {
		// No range: the defaults of a new one.
		const SvmRange def;
		location = def.preferred_loc;
		prefetch = def.prefetch_loc;
		granularity = def.granularity;
		flags_and = flags_or = def.flags;
		access = p.xnack ? supported : 0;
		aip = 0;
	}
	for (; it != p.svm.end() && it->first <= last; ++it) {
		const SvmRange &r = it->second;
		if (get_pref) {
			if (r.preferred_loc == SVM_LOCATION_UNDEFINED ||
			    (location != SVM_LOCATION_UNDEFINED && location != r.preferred_loc)) {
				location = SVM_LOCATION_UNDEFINED;
				get_pref = false;
			} else {
				location = r.preferred_loc;
			}
		}
		if (get_prefetch) {
			if (r.prefetch_loc == SVM_LOCATION_UNDEFINED ||
			    (prefetch != SVM_LOCATION_UNDEFINED && prefetch != r.prefetch_loc)) {
				prefetch = SVM_LOCATION_UNDEFINED;
				get_prefetch = false;
			} else {
				prefetch = r.prefetch_loc;
			}
		}
		if (get_access) {
			access &= r.access;
			aip &= r.aip;
		}
		if (get_flags) {
			flags_and &= r.flags;
			flags_or |= r.flags;
		}
		if (get_gran && r.granularity < granularity)
			granularity = r.granularity;
	}
	for (auto &a : attrs) {
		switch (a.type) {
		case SVM_ATTR_PREFERRED_LOC: a.value = location; break;
		case SVM_ATTR_PREFETCH_LOC: a.value = prefetch; break;
		case SVM_ATTR_ACCESS: {
			const int i = gpuidx(p, a.value);
			if (i < 0)
				return -EINVAL;
			a.type = bit(access, i) ? SVM_ATTR_ACCESS : bit(aip, i) ? SVM_ATTR_ACCESS_IN_PLACE : SVM_ATTR_NO_ACCESS;
			break;
		}
		case SVM_ATTR_SET_FLAGS: a.value = flags_and; break;
		case SVM_ATTR_CLR_FLAGS: a.value = ~flags_or; break;
		case SVM_ATTR_GRANULARITY: a.value = granularity; break;
		default: break;
		}
	}
	return 0;
}

// kfd_ioctl_svm (with kfd_ioctl_svm_validate: the cmd's size must hold
// nattr attributes) and svm_ioctl. An unknown op returns EINVAL as a
// positive value, as the kernel's svm_ioctl does.
long ModelImpl::kfd_svm(Caller &c, KfdProcess &p, void *buf, uint64_t uarg, size_t usize)
{
	SvmArgs a;
	std::memcpy(&a, buf, sizeof a);
	if (usize < sizeof(SvmArgs) + uint64_t{a.nattr} * sizeof(SvmAttribute))
		return -EINVAL;
	if ((a.start_addr & (kPage - 1)) || (a.size & (kPage - 1)) || !a.start_addr || !a.size)
		return -EINVAL;
	std::vector<SvmAttribute> attrs(a.nattr);
	const size_t bytes = attrs.size() * sizeof(SvmAttribute);
	if (bytes && c.read(uarg + sizeof(SvmArgs), attrs.data(), bytes))
		return -EFAULT;
	const uint64_t start = a.start_addr / kPage, npages = a.size / kPage;
	if (a.op == SVM_OP_SET_ATTR)
		return svm_set_attr(p, start, npages, attrs);
	if (a.op != SVM_OP_GET_ATTR)
		return EINVAL;
	if (int e = svm_get_attr(p, start, npages, attrs))
		return e;
	// The attributes go back with the args: those inside the chokepoint's
	// buffer through it, the rest directly.
	const size_t in_buf = std::min(bytes, kArgBuf - sizeof(SvmArgs));
	std::memcpy(static_cast<uint8_t *>(buf) + sizeof(SvmArgs), attrs.data(), in_buf);
	if (bytes > in_buf && c.write(uarg + sizeof(SvmArgs) + in_buf, reinterpret_cast<const uint8_t *>(attrs.data()) + in_buf,
				     bytes - in_buf))
		return -EFAULT;
	return 0;
}

// kfd_criu_resume_svm: each saved range set again with its attributes; an
// undefined prefetch location becomes a no-op SET_FLAGS 0, and CLR_FLAGS
// clears what the saved SET_FLAGS did not have.
int ModelImpl::svm_criu_resume(KfdProcess &p)
{
	std::vector<SvmSaved> saved = std::move(p.svm_restored);
	p.svm_restored.clear();
	for (auto &s : saved) {
		uint32_t set_flags = 0xffffffff;
		for (auto &a : s.attrs) {
			if (a.type == SVM_ATTR_PREFETCH_LOC && a.value == SVM_LOCATION_UNDEFINED)
				a = SvmAttribute{SVM_ATTR_SET_FLAGS, 0};
			else if (a.type == SVM_ATTR_SET_FLAGS)
				set_flags = a.value;
		}
		s.attrs.push_back(SvmAttribute{SVM_ATTR_CLR_FLAGS, ~set_flags});
		if (int e = svm_set_attr(p, s.start, s.npages, s.attrs))
			return e;
	}
	return 0;
}

// ---- SVM on the GPUs ---------------------------------------------------------

namespace {

int64_t boot_ns()
{
	timespec ts{};
	::clock_gettime(CLOCK_BOOTTIME, &ts);
	return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...)
{
	char b[160];
	va_list ap;
	va_start(ap, f);
	std::vsnprintf(b, sizeof b, f, ap);
	va_end(ap);
	return b;
}

// The user gpu_id of the GPU whose VRAM holds r, 0 for system memory (the
// kernel's prange->actual_loc).
uint32_t actual_loc(const KfdProcess &p, const SvmRange &r)
{
	for (const Pdd &pdd : p.pdds)
		if (pdd.dev == r.vram.device())
			return pdd.user_gpu_id;
	return 0;
}

// svm_range_best_restore_location for a fault of GPU pdds[i]: a user
// gpu_id, 0 (system memory), or -1 (that GPU has no access).
int64_t best_restore_location(const KfdProcess &p, const SvmRange &r, int i)
{
	const Pdd &pdd = p.pdds[static_cast<size_t>(i)];
	if (r.preferred_loc == pdd.user_gpu_id || r.preferred_loc == SVM_LOCATION_SYSMEM)
		return r.preferred_loc;
	if (r.preferred_loc != SVM_LOCATION_UNDEFINED) {
		const int pi = gpuidx(p, r.preferred_loc);
		if (pi >= 0 && same_hive(*pdd.dev, *p.pdds[static_cast<size_t>(pi)].dev))
			return r.preferred_loc;
	}
	if (bit(r.access, i))
		return pdd.user_gpu_id;
	if (!bit(r.aip, i))
		return -1;
	const Device *at = r.vram.device();
	return at && same_hive(*pdd.dev, *at) ? int64_t{actual_loc(p, r)} : 0;
}

} // namespace

int ModelImpl::svm_migrate(KfdProcess &p, SvmRange &r, Device *to, uint32_t trigger)
{
	Device *from = r.vram.device();
	if (from == to)
		return 0;
	const uint64_t bytes = r.npages() * kPage;
	// amdgpu_amdkfd_reserve_mem_limit, then TTM's room (eviction.cpp), as
	// for a KFD BO.
	if (to && (*to->kfd_vram_used + bytes > to->vram_size || !make_vram_room(*to, bytes, p.tgid)))
		return -ENOMEM;
	const uint32_t src = actual_loc(p, r);
	const uint32_t dst = to ? p.pdd_by_actual_id(to->gpu_id)->user_gpu_id : 0;
	Device &node = to ? *to : *from; // the GPU that does the copy
	smi_event(node.gpu_id, p.tgid, SMI_EVENT_MIGRATE_START,
		  fmt("%lld -%d @%lx(%lx) %x->%x %x:%x %d", static_cast<long long>(boot_ns()), p.tgid,
		      static_cast<unsigned long>(r.start), static_cast<unsigned long>(r.npages()), src, dst,
		      r.prefetch_loc, r.preferred_loc, static_cast<int>(trigger)));
	r.vram.release();
	if (to)
		r.vram = VramCharge(*to, bytes);
	smi_event(node.gpu_id, p.tgid, SMI_EVENT_MIGRATE_END,
		  fmt("%lld -%d @%lx(%lx) %x->%x %d 0", static_cast<long long>(boot_ns()), p.tgid,
		      static_cast<unsigned long>(r.start), static_cast<unsigned long>(r.npages()), src, dst,
		      static_cast<int>(trigger)));
	return 0;
}

// svm_range_create_unregistered_range: the 2 MiB aligned block around
// `page`, cut at the bounds of the process's mapping that holds it (where
// ProcessMemory cannot tell: at the first page on either side it cannot
// read), at the neighbouring ranges and at the BOs mapped in `vm` (a BO
// at `page` itself: none). The process's XNACK is on, so every GPU may
// access it. Null if `page` is not the process's memory.
SvmRange *ModelImpl::svm_new_unregistered(KfdProcess &p, const Vm &vm, uint64_t page)
{
	constexpr uint64_t kBlock = 512; // pages
	auto readable = [&](uint64_t pg) {
		uint8_t b;
		return pm_->read(p.tgid, pg * kPage, &b, 1) == 0;
	};
	if (!readable(page))
		return nullptr;
	uint64_t lo = page & ~(kBlock - 1), hi = lo + kBlock - 1;
	auto next = p.svm.upper_bound(page);
	if (next != p.svm.end())
		hi = std::min(hi, next->first - 1);
	if (next != p.svm.begin())
		lo = std::max(lo, std::prev(next)->second.last + 1);
	for (const auto &[va, m] : vm.all()) { // svm_range_check_vm
		const uint64_t s = va / kPage, l = (va + m.size - 1) / kPage;
		if (s <= page && page <= l)
			return nullptr;
		if (l < page)
			lo = std::max(lo, l + 1);
		else if (s <= hi)
			hi = s - 1;
	}
	uint64_t vs = 0, ve = 0;
	if (pm_->vma_of(p.tgid, page * kPage, &vs, &ve)) {
		lo = std::max(lo, vs / kPage);
		hi = std::min(hi, ve / kPage - 1);
	} else {
		uint64_t s = page, l = page;
		while (s > lo && readable(s - 1))
			--s;
		while (l < hi && readable(l + 1))
			++l;
		lo = s;
		hi = l;
	}
	SvmRange r;
	r.start = lo;
	r.last = hi;
	r.access = p.pdds.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << p.pdds.size()) - 1;
	return &p.svm.emplace(lo, std::move(r)).first->second;
}

// svm_range_restore_pages for a fault of GPU pdds[i] at `page`: 0 once
// the range is mapped there, or why it stays a VM fault.
const char *ModelImpl::svm_restore_pages(KfdProcess &p, int i, uint64_t page, bool write)
{
	auto it = p.svm.upper_bound(page);
	SvmRange *r = it != p.svm.begin() && std::prev(it)->second.last >= page ? &std::prev(it)->second : nullptr;
	if (!r && !(r = svm_new_unregistered(p, p.pdds[static_cast<size_t>(i)].drm->vm, page)))
		return "svm: no memory at the address";
	const int64_t best = best_restore_location(p, *r, i);
	if (best < 0)
		return "svm: gpu has no access to the range";
	const uint32_t gpu = p.pdds[static_cast<size_t>(i)].user_gpu_id, dev = p.pdds[static_cast<size_t>(i)].dev->gpu_id;
	smi_event(dev, p.tgid, SMI_EVENT_PAGE_FAULT_START,
		  fmt("%lld -%d @%lx(%x) %c", static_cast<long long>(boot_ns()), p.tgid, static_cast<unsigned long>(page),
		      gpu, write ? 'W' : 'R'));
	const bool migrate = static_cast<uint32_t>(best) != actual_loc(p, *r);
	if (migrate) {
		Device *to = best ? p.pdd_by_user_id(static_cast<uint32_t>(best))->dev : nullptr;
		if (svm_migrate(p, *r, to, MIGRATE_TRIGGER_PAGEFAULT_GPU))
			return "svm: no vram to migrate the range to";
	}
	r->mapped |= uint64_t{1} << i;
	smi_event(dev, p.tgid, SMI_EVENT_PAGE_FAULT_END,
		  fmt("%lld -%d @%lx(%x) %c", static_cast<long long>(boot_ns()), p.tgid, static_cast<unsigned long>(page),
		      gpu, migrate ? 'M' : 'U'));
	return nullptr;
}

int ModelImpl::svm_gpu_access(DrmFile &f, uint64_t va, uint64_t len, bool write, Segment *seg)
{
	const uint64_t page = va / kPage;
	const char *why = "unmapped";
	auto pit = procs_.find(f.kfd_owner);
	KfdProcess *p = pit == procs_.end() ? nullptr : pit->second.get();
	int i = -1;
	for (size_t k = 0; p && k < p->pdds.size() && k < 64; ++k)
		if (p->pdds[k].drm.get() == &f)
			i = static_cast<int>(k);
	if (i >= 0) {
		auto it = p->svm.upper_bound(page);
		const SvmRange *r =
			it != p->svm.begin() && std::prev(it)->second.last >= page ? &std::prev(it)->second : nullptr;
		if ((!r || !bit(r->mapped, i)) && p->xnack && (why = svm_restore_pages(*p, i, page, write)) == nullptr) {
			it = p->svm.upper_bound(page);
			r = &std::prev(it)->second;
		}
		if (r && bit(r->mapped, i) && write && (r->flags & SVM_FLAG_GPU_RO))
			why = "write to read-only page";
		else if (r && bit(r->mapped, i)) {
			if (!p->svm_memory) {
				p->svm_memory = std::make_shared<Bo>();
				p->svm_memory->type = BoType::Userptr;
				p->svm_memory->size = kHoleMask + 1;
				p->svm_memory->userptr_tgid = p->tgid;
			}
			*seg = Segment{p->svm_memory, va, std::min(len, (r->last + 1) * kPage - va)};
			return 0;
		}
	}
	counters_->vm_fault(f.dev->gpu_id, va, why);
	return -EFAULT;
}

void ModelImpl::svm_unmap_pages(KfdProcess &p, uint64_t start, uint64_t last)
{
	auto it = p.svm.upper_bound(start);
	if (it != p.svm.begin() && std::prev(it)->second.last >= start)
		--it;
	std::vector<uint64_t> keys;
	for (; it != p.svm.end() && it->first <= last; ++it)
		keys.push_back(it->first);
	for (uint64_t key : keys) {
		SvmRange *r = &p.svm.at(key);
		if (r->start < start) { // keep the head
			SvmRange m = split_at(*r, start);
			r = &p.svm.emplace(m.start, std::move(m)).first->second;
		}
		if (r->last > last) { // keep the tail
			SvmRange t = split_at(*r, last + 1);
			p.svm.emplace(t.start, std::move(t));
		}
		for (size_t i = 0; i < p.pdds.size() && i < 64; ++i)
			if (bit(r->mapped, static_cast<int>(i)))
				smi_event(p.pdds[i].dev->gpu_id, p.tgid, SMI_EVENT_UNMAP_FROM_GPU,
					  fmt("%lld -%d @%lx(%lx) %x %d", static_cast<long long>(boot_ns()), p.tgid,
					      static_cast<unsigned long>(r->start), static_cast<unsigned long>(r->npages()),
					      p.pdds[i].user_gpu_id, static_cast<int>(SVM_UNMAP_TRIGGER_UNMAP_FROM_CPU)));
		p.svm.erase(r->start);
	}
}

void ModelImpl::svm_unmap(pid_t tgid, uint64_t addr, uint64_t len)
{
	Lock lk(mu_);
	auto it = procs_.find(tgid);
	if (it == procs_.end() || !len || it->second->svm.empty())
		return;
	svm_unmap_pages(*it->second, addr / kPage, (addr + len - 1) / kPage);
}

uint64_t ModelImpl::svm_evictable(const Device &d, pid_t current) const
{
	uint64_t bytes = 0;
	for (const auto &[pid, p] : procs_)
		if (pid != current)
			for (const auto &[start, r] : p->svm)
				if (r.vram.device() == &d)
					bytes += r.npages() * kPage;
	return bytes;
}

uint64_t ModelImpl::svm_evict_vram(Device &d, uint64_t need, pid_t current)
{
	uint64_t freed = 0;
	for (auto &[pid, p] : procs_) {
		if (pid == current)
			continue;
		for (auto &[start, r] : p->svm) {
			if (freed >= need)
				return freed;
			if (r.vram.device() != &d)
				continue;
			freed += r.npages() * kPage;
			(void)svm_migrate(*p, r, nullptr, MIGRATE_TRIGGER_TTM_EVICTION);
			if (p->xnack) // the next GPU fault brings it back
				r.mapped = 0;
		}
	}
	return freed;
}

void ModelImpl::smi_event(uint32_t gpu_id, pid_t pid, uint32_t event, const std::string &text)
{
	const std::string line = fmt("%x ", event) + text + "\n";
	const uint64_t all = uint64_t{1} << (SMI_EVENT_ALL_PROCESS - 1);
	for (auto &[tgid, p] : procs_)
		for (auto &c : p->smi_peers) {
			if (c.gpu_id != gpu_id)
				continue;
			uint64_t mask;
			while (::recv(c.peer.get(), &mask, sizeof mask, MSG_DONTWAIT) == static_cast<ssize_t>(sizeof mask))
				c.events = mask;
			if (!(c.events & (uint64_t{1} << (event - 1))))
				continue;
			if (pid && tgid != pid && !(c.suser && (c.events & all)))
				continue;
			(void)::send(c.peer.get(), line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
		}
}

// kfd_ioctl_smi_events + kfd_smi_event_open: an fd (O_RDWR, not
// close-on-exec) for a GPU of the process (user gpu_id), else EINVAL.
long ModelImpl::kfd_smi_events(Caller &c, KfdProcess &p, SmiEvents &a, uint64_t uarg)
{
	if (gpuidx(p, a.gpuid) < 0)
		return -EINVAL;
	int sv[2];
	if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		return -errno;
	Fd client(sv[0]);
	p.smi_peers.push_back(KfdProcess::SmiClient{Fd(sv[1]), p.pdd_by_user_id(a.gpuid)->dev->gpu_id, 0,
						    c.identity().cap_checkpoint_restore});
	c.install_fd(client.get(), false, uarg + offsetof(SmiEvents, anon_fd));
	p.smi_clients.push_back(std::move(client)); // the transport sends it after the call
	return 0;
}

} // namespace kfdemu::detail
