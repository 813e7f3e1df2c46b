// SPDX-License-Identifier: GPL-2.0-only
//
// The C ABI entry file: CR_PLUGIN_DESC and the hook functions CRIU calls.
//
// This is the only file with mutable process-wide state: the descriptor
// (its hook count is chosen when CRIU loads the plugin) and the current
// stage's session, created by init() and destroyed by exit(). Every hook
// forwards to it; no exception crosses into CRIU (an allocation failure
// becomes -ENOMEM). A hook with nothing to do returns -ENOTSUP so CRIU
// offers the call to the next plugin.
//
// One .so serves both CRIU plugin ABIs. CRIU reads CR_PLUGIN_DESC right
// after dlopen() and refuses ("Corrupted plugin") a descriptor that
// declares more hooks than it knows: 12 in CRIU 4.0/4.1, 13 in 4.2-4.2.1,
// 15 in criu-dev. The descriptor is built by this file's static
// initialiser, which runs inside that dlopen(), so it declares exactly the
// loader's count (criu::host_hook_slots), or 12 when the loader does not
// say. Without DUMP_DEVICES_LATE a dump resumes a process's queues as soon
// as its /dev/kfd file is dumped; the restore is prepared in init(RESTORE)
// under every ABI (RESTORE_INIT is not used). Without POST_FORKING (12
// hooks) each task copies its own GPU memory (no parallel restore).
#include <cerrno>
#include <exception>
#include <memory>
#include <new>

#include "amdgpu_plugin/criu_plugin_abi.h"
#include "base/log.h"
#include "config/config.h"
#include "plugin/criu_api.h"
#include "plugin/dump.h"
#include "plugin/restore.h"

namespace {

using amdcr::DumpSession;
using amdcr::RestoreSession;

// Hook slots every CRIU 4.x knows (4.0 and 4.1: DUMP_UNIX_SK..CHECKPOINT_DEVICES).
constexpr unsigned kMinHookSlots = CR_PLUGIN_HOOK__POST_FORKING;

unsigned declared_hook_count()
{
	constexpr unsigned kOurs = CR_PLUGIN_HOOK__MAX;
	const unsigned slots = amdcr::criu::host_hook_slots().value_or(kMinHookSlots);
	return slots < kOurs ? slots : kOurs;
}

cr_plugin_desc_t make_desc();

} // namespace

extern "C" {
__attribute__((visibility("default"))) cr_plugin_desc_t CR_PLUGIN_DESC = make_desc();
}

namespace {

std::unique_ptr<DumpSession> g_dump;
std::unique_ptr<RestoreSession> g_restore;

template <typename Fn>
int guarded(Fn &&fn)
{
	try {
		return fn();
	} catch (const std::bad_alloc &) {
		amdcr::log_error("out of memory");
		return -ENOMEM;
	} catch (const std::exception &e) {
		amdcr::log_error("internal error: %s", e.what());
		return -EIO;
	} catch (...) {
		amdcr::log_error("internal error");
		return -EIO;
	}
}

amdcr::SessionEnv make_env()
{
	auto load = amdcr::config_from_process_env();
	for (const auto &w : load.warnings)
		amdcr::log_warn("%s", w.c_str());
	// At CRIU's default level when the user changed something (a check
	// switched off shows in every log); debug otherwise, so a machine
	// without AMD GPUs stays silent.
	amdcr::log_msg(load.config.is_default() ? amdcr::LogLevel::Debug : amdcr::LogLevel::Notice, "%s",
		       load.config.describe().c_str());
	amdcr::SessionEnv env;
	env.config = load.config;
	env.dump_devices_late = CR_PLUGIN_DESC.max_hooks > CR_PLUGIN_HOOK__DUMP_DEVICES_LATE;
	env.post_forking = CR_PLUGIN_DESC.max_hooks > CR_PLUGIN_HOOK__POST_FORKING;
	return env;
}

int plugin_init(int stage)
{
	return guarded([&] {
		g_dump.reset();
		g_restore.reset();
		if (stage == CR_PLUGIN_STAGE__DUMP || stage == CR_PLUGIN_STAGE__PRE_DUMP) {
			// A pre-dump (criu pre-dump, CRIU 4.2.1 and criu-dev) runs
			// PAUSE_DEVICES and HANDLE_DEVICE_VMA only: CRIU refuses a
			// device mapping no plugin handles, so the session answers
			// for the GPU mappings. No file hook runs, so it copies no
			// GPU memory: KFD's checkpoint ops need the process's own
			// /dev/kfd file, which CRIU hands to DUMP_EXT_FILE alone.
			g_dump = std::make_unique<DumpSession>(make_env());
		} else if (stage == CR_PLUGIN_STAGE__RESTORE) {
			// CRIU checks the inventory's plugin list right after
			// every plugin's init, so the restore is prepared (and our
			// entry consumed) here. A refusal fails init: CRIU aborts
			// the restore before any task exists.
			g_restore = std::make_unique<RestoreSession>(make_env());
			const int ret = g_restore->prepare();
			if (ret != -ENOTSUP)
				return ret;
		}
		return 0;
	});
}

void plugin_exit(int /*stage*/, int ret)
{
	guarded([&] {
		if (g_dump)
			g_dump->finish(ret);
		if (g_restore)
			g_restore->finish(ret);
		g_dump.reset();
		g_restore.reset();
		return 0;
	});
}

int dump_ext_file(int fd, int id)
{
	return guarded([&] { return g_dump ? g_dump->dump_ext_file(fd, id) : -ENOTSUP; });
}

int handle_device_vma(int fd, const struct stat *st)
{
	return guarded([&] { return g_dump && st ? g_dump->handle_device_vma(fd, *st) : -ENOTSUP; });
}

int dump_devices_late(int pid)
{
	return guarded([&] { return g_dump ? g_dump->dump_devices_late(pid) : -ENOTSUP; });
}

int restore_ext_file(int id, bool *retry_needed)
{
	// Only criu-dev's 15-hook ABI passes `retry_needed` (and reads it
	// uninitialised unless we set it); CRIU 4.2.1 calls this hook with
	// the id alone (criu/files-ext.c), so the second argument is whatever
	// the register held and must not be written.
	if (CR_PLUGIN_DESC.max_hooks <= CR_PLUGIN_HOOK__DUMP_DEVICES_LATE)
		retry_needed = nullptr;
	return guarded([&] { return g_restore ? g_restore->restore_ext_file(id, retry_needed) : -ENOTSUP; });
}

int update_vma_map(const char *path, uint64_t addr, uint64_t old_pgoff, uint64_t *new_pgoff,
		   int *plugin_fd)
{
	return guarded([&] {
		return g_restore ? g_restore->update_vma_map(path, addr, old_pgoff, new_pgoff, plugin_fd)
				 : -ENOTSUP;
	});
}

int post_forking()
{
	return guarded([&] { return g_restore ? g_restore->post_forking() : -ENOTSUP; });
}

int resume_devices_late(int pid)
{
	return guarded([&] { return g_restore ? g_restore->resume_devices_late(pid) : -ENOTSUP; });
}

cr_plugin_desc_t make_desc()
{
	cr_plugin_desc_t d{};
	d.name = amdcr::kPluginName;
	d.init = plugin_init;
	d.exit = plugin_exit;
	d.version = CRIU_PLUGIN_VERSION;
	d.max_hooks = declared_hook_count();
	d.hooks[CR_PLUGIN_HOOK__DUMP_EXT_FILE] = reinterpret_cast<void *>(dump_ext_file);
	d.hooks[CR_PLUGIN_HOOK__RESTORE_EXT_FILE] = reinterpret_cast<void *>(restore_ext_file);
	d.hooks[CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA] = reinterpret_cast<void *>(handle_device_vma);
	d.hooks[CR_PLUGIN_HOOK__UPDATE_VMA_MAP] = reinterpret_cast<void *>(update_vma_map);
	d.hooks[CR_PLUGIN_HOOK__RESUME_DEVICES_LATE] = reinterpret_cast<void *>(resume_devices_late);
	d.hooks[CR_PLUGIN_HOOK__DUMP_DEVICES_LATE] = reinterpret_cast<void *>(dump_devices_late);
	d.hooks[CR_PLUGIN_HOOK__POST_FORKING] = reinterpret_cast<void *>(post_forking);
	return d;
}

} // namespace
