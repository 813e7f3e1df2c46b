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
// What the model does not do: no data moves (a VRAM-resident range's
// bytes stay in the process's memory, which is what its CPU reads; only
// the VRAM is accounted), no GPU page tables (SDMA and CP packets do not
// reach SVM ranges), no MMU notifiers (a range stays when the process
// unmaps its memory), and "the process's memory" is memory the model can
// read (the kernel also takes PROT_NONE mappings, and refuses device
// mappings, which the model cannot tell apart).
//
// SMI_EVENTS: the fd of kfd_smi_event_open, with no events: a read finds
// none (EAGAIN), poll never reports one. It is one end of a socket pair
// whose other end the process's context keeps: a write (the event mask)
// is taken and changes nothing (the kernel refuses one under 8 bytes).
#include "model/state.h"

#include <sys/socket.h>

#include <algorithm>
#include <bit>
#include <cerrno>
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
	tail.mapped_to_gpu = r.mapped_to_gpu;
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
		if (same_attrs(p, r, attrs) && r.mapped_to_gpu) {
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
		if (best == SVM_LOCATION_SYSMEM && r.vram.device()) {
			r.vram.release();
			migrated = true;
		} else if (best != SVM_LOCATION_SYSMEM && best != SVM_LOCATION_UNDEFINED) {
			Device &d = *p.pdds[static_cast<size_t>(gpuidx(p, best))].dev;
			if (r.vram.device() != &d) {
				r.vram.release();
				const uint64_t bytes = r.npages() * kPage;
				// amdgpu_amdkfd_reserve_mem_limit, then TTM's room
				// (eviction.cpp), as for a KFD BO.
				if (*d.kfd_vram_used + bytes > d.vram_size || !make_vram_room(d, bytes, p.tgid)) {
					ret = -ENOMEM;
					continue;
				}
				r.vram = VramCharge(d, bytes);
			}
			migrated = true;
		}
		if (!migrated && !update_mapping)
			continue;
		// svm_range_validate_and_map: mapped on the GPUs that may access
		// it (with XNACK on, only those in place, unless always mapped).
		const bool all = !p.xnack || (r.flags & SVM_FLAG_GPU_ALWAYS_MAPPED);
		r.mapped_to_gpu = (all ? (r.access | r.aip) : r.aip) != 0;
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
	p.smi_peers.emplace_back(sv[1]);
	c.install_fd(client.get(), false, uarg + offsetof(SmiEvents, anon_fd));
	p.smi_clients.push_back(std::move(client)); // the transport sends it after the call
	return 0;
}

} // namespace kfdemu::detail
