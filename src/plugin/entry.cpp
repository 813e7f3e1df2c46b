// SPDX-License-Identifier: GPL-2.0-only
//
// The C ABI entry file: CR_PLUGIN_DESC and the hook functions CRIU calls.
// This is the only file with mutable process-wide state (the plugin's
// per-stage session, created in init and destroyed in exit); everything else
// is reached from here by reference. No exception crosses this boundary.
#include <cerrno>

#include "amdgpu_plugin/criu_plugin_abi.h"

namespace {

int plugin_init(int /*stage*/) { return 0; }
void plugin_exit(int /*stage*/, int /*ret*/) {}

int dump_ext_file(int, int) { return -ENOTSUP; }
int restore_ext_file(int, bool *) { return -ENOTSUP; }
int handle_device_vma(int, const struct stat *) { return -ENOTSUP; }
int update_vma_map(const char *, uint64_t, uint64_t, uint64_t *, int *) { return -ENOTSUP; }
int resume_devices_late(int) { return -ENOTSUP; }
int pause_devices(int) { return -ENOTSUP; }
int checkpoint_devices(int) { return -ENOTSUP; }
int post_forking() { return -ENOTSUP; }
int restore_init() { return -ENOTSUP; }
int dump_devices_late(int) { return -ENOTSUP; }

cr_plugin_desc_t make_desc()
{
	cr_plugin_desc_t d{};
	d.name = "amdgpu_plugin";
	d.init = plugin_init;
	d.exit = plugin_exit;
	d.version = CRIU_PLUGIN_VERSION;
	d.max_hooks = CR_PLUGIN_HOOK__MAX;
	d.hooks[CR_PLUGIN_HOOK__DUMP_EXT_FILE] = reinterpret_cast<void *>(dump_ext_file);
	d.hooks[CR_PLUGIN_HOOK__RESTORE_EXT_FILE] = reinterpret_cast<void *>(restore_ext_file);
	d.hooks[CR_PLUGIN_HOOK__HANDLE_DEVICE_VMA] = reinterpret_cast<void *>(handle_device_vma);
	d.hooks[CR_PLUGIN_HOOK__UPDATE_VMA_MAP] = reinterpret_cast<void *>(update_vma_map);
	d.hooks[CR_PLUGIN_HOOK__RESUME_DEVICES_LATE] = reinterpret_cast<void *>(resume_devices_late);
	d.hooks[CR_PLUGIN_HOOK__PAUSE_DEVICES] = reinterpret_cast<void *>(pause_devices);
	d.hooks[CR_PLUGIN_HOOK__CHECKPOINT_DEVICES] = reinterpret_cast<void *>(checkpoint_devices);
	d.hooks[CR_PLUGIN_HOOK__POST_FORKING] = reinterpret_cast<void *>(post_forking);
	d.hooks[CR_PLUGIN_HOOK__RESTORE_INIT] = reinterpret_cast<void *>(restore_init);
	d.hooks[CR_PLUGIN_HOOK__DUMP_DEVICES_LATE] = reinterpret_cast<void *>(dump_devices_late);
	return d;
}

} // namespace

extern "C" {
__attribute__((visibility("default"))) cr_plugin_desc_t CR_PLUGIN_DESC = make_desc();
}
