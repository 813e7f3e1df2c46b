// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/criu_api.h"

#include <dlfcn.h>
#include <link.h>

#include "amdgpu_plugin/criu_plugin_abi.h"

namespace amdcr::criu {
namespace {

template <typename Fn>
Fn *lookup(const char *symbol)
{
	return reinterpret_cast<Fn *>(dlsym(RTLD_DEFAULT, symbol));
}

} // namespace

std::optional<int> image_dir_fd()
{
	auto *fn = lookup<criu_get_image_dir_t>("criu_get_image_dir");
	if (!fn)
		return std::nullopt;
	const int fd = fn();
	if (fd < 0)
		return std::nullopt;
	return fd;
}

bool add_inventory_plugin(const char *name)
{
	using Fn = int(const char *);
	auto *fn = lookup<Fn>("add_inventory_plugin");
	return fn && fn(name) == 0;
}

bool consume_inventory_entry(const char *name)
{
	// CRIU 4.0-4.2: bool check_and_remove_inventory_plugin(const char *name, size_t n);
	// newer CRIU drops `n`. Passing both is correct for either on x86-64
	// SysV (an extra integer argument is ignored by the callee).
	using Fn = bool(const char *, size_t);
	auto *fn = lookup<Fn>("check_and_remove_inventory_plugin");
	if (!fn)
		return true;
	size_t n = 0;
	while (name[n])
		n++;
	return fn(name, n + 1);
}

std::optional<int> unused_fd_of_task(int pid)
{
	using Fn = int(int);
	auto *fn = lookup<Fn>("find_unused_fd_pid");
	if (!fn)
		return std::nullopt;
	const int fd = fn(pid);
	if (fd < 0)
		return std::nullopt;
	return fd;
}

std::optional<unsigned> host_hook_slots()
{
	// CRIU's registry is { struct list_head head; struct list_head
	// hook_chain[CR_PLUGIN_HOOK__MAX]; }: its ELF symbol size gives the
	// hook count without any knowledge of the CRIU version.
	constexpr size_t kListHead = 2 * sizeof(void *);
	void *sym = dlsym(RTLD_DEFAULT, "cr_plugin_ctl");
	if (!sym)
		return std::nullopt;
	Dl_info info{};
	void *extra = nullptr;
	if (!dladdr1(sym, &info, &extra, RTLD_DL_SYMENT) || !extra)
		return std::nullopt;
	const auto *entry = static_cast<const ElfW(Sym) *>(extra);
	const size_t size = entry->st_size;
	if (size <= kListHead || size % kListHead != 0)
		return std::nullopt;
	return static_cast<unsigned>(size / kListHead - 1);
}

} // namespace amdcr::criu
