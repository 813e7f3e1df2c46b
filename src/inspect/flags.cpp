// SPDX-License-Identifier: GPL-2.0-only
#include "inspect/flags.h"

#include <linux/kfd_ioctl.h>
#include <amdgpu_drm.h>

#include "base/result.h"

namespace amdcr::inspect {

namespace {

struct FlagName {
	uint64_t bit;
	const char *name;
};

// The memory type bits first: kfd_bo_type takes the first match. (The
// kernel writes bit 31 as the int (1 << 31): the cast keeps it 32 bits.)
constexpr FlagName kKfdAllocFlags[] = {
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_VRAM), "vram"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_GTT), "gtt"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_USERPTR), "userptr"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL), "doorbell"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP), "mmio_remap"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE), "writable"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE), "executable"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC), "public"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE), "no_substitute"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM), "aql_queue_mem"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_COHERENT), "coherent"},
	{static_cast<uint32_t>(KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED), "uncached"},
};
constexpr size_t kKfdTypeFlags = 5;

constexpr FlagName kGemDomains[] = {
	{AMDGPU_GEM_DOMAIN_CPU, "cpu"}, {AMDGPU_GEM_DOMAIN_GTT, "gtt"},
	{AMDGPU_GEM_DOMAIN_VRAM, "vram"}, {AMDGPU_GEM_DOMAIN_GDS, "gds"},
	{AMDGPU_GEM_DOMAIN_GWS, "gws"}, {AMDGPU_GEM_DOMAIN_OA, "oa"},
};

constexpr FlagName kGemCreateFlags[] = {
	{AMDGPU_GEM_CREATE_CPU_ACCESS_REQUIRED, "cpu_access_required"},
	{AMDGPU_GEM_CREATE_NO_CPU_ACCESS, "no_cpu_access"},
	{AMDGPU_GEM_CREATE_CPU_GTT_USWC, "cpu_gtt_uswc"},
	{AMDGPU_GEM_CREATE_VRAM_CLEARED, "vram_cleared"},
	{AMDGPU_GEM_CREATE_VRAM_CONTIGUOUS, "vram_contiguous"},
	{AMDGPU_GEM_CREATE_VM_ALWAYS_VALID, "vm_always_valid"},
	{AMDGPU_GEM_CREATE_EXPLICIT_SYNC, "explicit_sync"},
	{AMDGPU_GEM_CREATE_VRAM_WIPE_ON_RELEASE, "vram_wipe_on_release"},
	{AMDGPU_GEM_CREATE_ENCRYPTED, "encrypted"},
	{AMDGPU_GEM_CREATE_PREEMPTIBLE, "preemptible"},
};

template <size_t N>
std::vector<std::string> names_of(uint64_t flags, const FlagName (&table)[N])
{
	std::vector<std::string> out;
	uint64_t named = 0;
	for (const FlagName &f : table) {
		named |= f.bit;
		if (flags & f.bit)
			out.emplace_back(f.name);
	}
	for (unsigned b = 0; b < 64; b++)
		if ((flags & ~named) & (1ull << b))
			out.push_back(strprintf("0x%llx", 1ull << b));
	return out;
}

} // namespace

std::vector<std::string> kfd_alloc_flag_names(uint32_t flags)
{
	return names_of(flags, kKfdAllocFlags);
}

std::vector<std::string> gem_domain_names(uint64_t domains)
{
	return names_of(domains, kGemDomains);
}

std::vector<std::string> gem_create_flag_names(uint64_t flags)
{
	return names_of(flags, kGemCreateFlags);
}

const char *kfd_bo_type(uint32_t flags)
{
	for (size_t i = 0; i < kKfdTypeFlags; i++)
		if (flags & kKfdAllocFlags[i].bit)
			return kKfdAllocFlags[i].name;
	return "other";
}

std::string join_flags(const std::vector<std::string> &names)
{
	if (names.empty())
		return "0";
	std::string out;
	for (const auto &n : names)
		out += (out.empty() ? "" : "|") + n;
	return out;
}

} // namespace amdcr::inspect
