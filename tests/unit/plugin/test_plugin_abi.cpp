// SPDX-License-Identifier: GPL-2.0-only
//
// The built amdgpu_plugin.so as CRIU 4.x sees it: dlopen + CR_PLUGIN_DESC,
// name, version, the hook count it declares to each CRIU ABI, exported
// symbols, and -ENOTSUP from every hook on a machine without an AMD GPU
// (this test machine has none and runs without the emulator). Criterion
// runs every Test in a process of its own, so each can impersonate another
// CRIU by loading that CRIU's plugin registry (tests/host/criu_ctl.c).
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "amdgpu_plugin/criu_plugin_abi.h"

namespace {

// Names of the defined dynamic symbols of an ELF64 shared object.
std::vector<std::string> defined_dynamic_symbols(const char *path)
{
	std::vector<std::string> names;
	const int fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(fd >= 0, "open %s: %s", path, strerror(errno));
	struct stat st {};
	cr_assert(fstat(fd, &st) == 0);
	void *map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	cr_assert(map != MAP_FAILED);
	const auto *base = static_cast<const unsigned char *>(map);
	const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(base);
	cr_assert(memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64);
	const auto *sh = reinterpret_cast<const Elf64_Shdr *>(base + eh->e_shoff);
	for (unsigned i = 0; i < eh->e_shnum; i++) {
		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		const auto *syms = reinterpret_cast<const Elf64_Sym *>(base + sh[i].sh_offset);
		const char *strtab = reinterpret_cast<const char *>(base + sh[sh[i].sh_link].sh_offset);
		const size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
		for (size_t k = 1; k < n; k++) {
			if (syms[k].st_shndx == SHN_UNDEF)
				continue;
			names.emplace_back(strtab + syms[k].st_name);
		}
	}
	munmap(map, static_cast<size_t>(st.st_size));
	return names;
}

struct Loaded {
	void *handle;
	cr_plugin_desc_t *desc;
};

// Loads the registry `cr_plugin_ctl` of a CRIU with `slots` hook slots
// into the global scope, where CRIU's executable would export it.
void impersonate_criu(unsigned slots)
{
	const char *lib = slots == 12 ? CRIU_CTL_12 : slots == 13 ? CRIU_CTL_13 : CRIU_CTL_15;
	cr_assert_not_null(dlopen(lib, RTLD_NOW | RTLD_GLOBAL), "dlopen %s: %s", lib, dlerror());
}

Loaded load()
{
	void *h = dlopen(AMDCR_PLUGIN_SO, RTLD_LAZY | RTLD_LOCAL);
	cr_assert_not_null(h, "dlopen: %s", dlerror());
	auto *d = static_cast<cr_plugin_desc_t *>(dlsym(h, "CR_PLUGIN_DESC"));
	cr_assert_not_null(d, "no CR_PLUGIN_DESC");
	return {h, d};
}

template <typename Fn>
Fn *hook(const cr_plugin_desc_t *d, cr_plugin_hook id)
{
	return reinterpret_cast<Fn *>(d->hooks[id]);
}

} // namespace

Test(plugin_abi, descriptor_as_criu_4_checks_it)
{
	impersonate_criu(15);
	Loaded l = load();
	cr_expect_str_eq(l.desc->name, "amdgpu_plugin");
	cr_expect_eq(l.desc->version, 512u);
	cr_expect_eq(l.desc->max_hooks, 15u);
	cr_expect_not_null(reinterpret_cast<void *>(l.desc->init));
	cr_expect_not_null(reinterpret_cast<void *>(l.desc->exit));
	// The hooks this plugin implements, and none of the unix-socket/mount/link ones.
	const cr_plugin_hook ours[] = {
		CR_PLUGIN_HOOK__DUMP_EXT_FILE,	   CR_PLUGIN_HOOK__RESTORE_EXT_FILE,
		CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA, CR_PLUGIN_HOOK__UPDATE_VMA_MAP,
		CR_PLUGIN_HOOK__RESUME_DEVICES_LATE, CR_PLUGIN_HOOK__DUMP_DEVICES_LATE,
	};
	for (auto id : ours)
		cr_expect_not_null(l.desc->hooks[id], "hook %d not registered", id);
	cr_expect_null(l.desc->hooks[CR_PLUGIN_HOOK__DUMP_UNIX_SK]);
	cr_expect_null(l.desc->hooks[CR_PLUGIN_HOOK__RESTORE_EXT_MOUNT]);
	// The restore is prepared in init(RESTORE) under every ABI.
	cr_expect_null(l.desc->hooks[CR_PLUGIN_HOOK__RESTORE_INIT]);
	dlclose(l.handle);
}

// CRIU refuses ("Corrupted plugin") a descriptor with more hooks than it
// knows: the plugin declares exactly its loader's count.
Test(plugin_abi, declares_13_hooks_to_criu_4_2)
{
	impersonate_criu(13);
	Loaded l = load();
	cr_expect_eq(l.desc->max_hooks, 13u);
	dlclose(l.handle);
}

Test(plugin_abi, declares_12_hooks_to_criu_4_0)
{
	impersonate_criu(12);
	Loaded l = load();
	cr_expect_eq(l.desc->max_hooks, 12u);
	dlclose(l.handle);
}

// A loader that does not export CRIU's registry gets the count every CRIU
// 4.x accepts.
Test(plugin_abi, declares_12_hooks_to_an_unknown_loader)
{
	Loaded l = load();
	cr_expect_eq(l.desc->max_hooks, 12u);
	dlclose(l.handle);
}

Test(plugin_abi, exports_only_the_descriptor)
{
	const auto names = defined_dynamic_symbols(AMDCR_PLUGIN_SO);
	cr_assert_eq(names.size(), 1u, "expected 1 defined dynamic symbol, found %zu (first: %s)",
		     names.size(), names.empty() ? "-" : names[0].c_str());
	cr_expect_eq(names[0], std::string("CR_PLUGIN_DESC"));
}

static void redirect_stderr() { cr_redirect_stderr(); }

// No /dev/kfd and no KFD topology on this machine: every hook that is given
// something to look at declines with -ENOTSUP, and nothing is printed.
Test(plugin_abi, enotsup_without_amd_gpu, .init = redirect_stderr)
{
	cr_assert(access("/dev/kfd", F_OK) != 0, "this test needs a machine without /dev/kfd");
	Loaded l = load();
	const cr_plugin_desc_t *d = l.desc;

	cr_assert_eq(d->init(CR_PLUGIN_STAGE__DUMP), 0);
	const int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	struct stat st {};
	cr_assert(fstat(fd, &st) == 0);
	cr_expect_eq(hook<cr_plugin_dump_file_t>(d, CR_PLUGIN_HOOK__DUMP_EXT_FILE)(fd, 1), -ENOTSUP);
	cr_expect_eq(hook<cr_plugin_handle_device_vma_t>(d, CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA)(fd, &st),
		     -ENOTSUP);
	cr_expect_eq(hook<cr_plugin_dump_devices_late_t>(d, CR_PLUGIN_HOOK__DUMP_DEVICES_LATE)(getpid()),
		     -ENOTSUP);
	if (auto *p = hook<cr_plugin_pause_devices_t>(d, CR_PLUGIN_HOOK__PAUSE_DEVICES))
		cr_expect_eq(p(getpid()), -ENOTSUP);
	if (auto *c = hook<cr_plugin_checkpoint_devices_t>(d, CR_PLUGIN_HOOK__CHECKPOINT_DEVICES))
		cr_expect_eq(c(getpid()), -ENOTSUP);
	d->exit(CR_PLUGIN_STAGE__DUMP, 0);

	cr_assert_eq(d->init(CR_PLUGIN_STAGE__RESTORE), 0);
	if (auto *p = hook<cr_plugin_post_forking_t>(d, CR_PLUGIN_HOOK__POST_FORKING))
		cr_expect_eq(p(), -ENOTSUP);
	bool retry = false;
	cr_expect_eq(hook<cr_plugin_restore_file_t>(d, CR_PLUGIN_HOOK__RESTORE_EXT_FILE)(1, &retry), -ENOTSUP);
	cr_expect_not(retry);
	uint64_t new_pgoff = 0;
	int plugin_fd = -1;
	cr_expect_eq(hook<cr_plugin_update_vma_map_t>(d, CR_PLUGIN_HOOK__UPDATE_VMA_MAP)(
			     "/dev/zero", 0x10000, 0, &new_pgoff, &plugin_fd),
		     -ENOTSUP);
	cr_expect_eq(hook<cr_plugin_resume_devices_late_t>(d, CR_PLUGIN_HOOK__RESUME_DEVICES_LATE)(getpid()),
		     -ENOTSUP);
	d->exit(CR_PLUGIN_STAGE__RESTORE, 0);
	close(fd);
	dlclose(l.handle);

	fflush(stderr);
	cr_expect_stderr_eq_str("", "the plugin printed something on a machine without AMD GPU");
}
