// SPDX-License-Identifier: GPL-2.0-only
//
// Plugin loading and hook chaining, as CRIU 4.x does it (criu/plugin.c of
// 4.2.1 and criu-dev): dlopen(RTLD_LAZY), the CR_PLUGIN_DESC descriptor,
// version and max_hooks checks against the host's own hook count
// (verify_plugin, plugin.c:83-97), init(stage) right after each load
// (cr_lib_load, plugin.c:153), hooks chained only below the plugin's
// max_hooks (plugin.c:163-167), and run_plugins() (include/plugin.h): the
// plugins that registered a hook are called in load order until one
// returns something other than -ENOTSUP.
#pragma once

#include <cerrno>
#include <string>
#include <vector>

#include "amdgpu_plugin/criu_plugin_abi.h"
#include "base/result.h"

namespace host {

const char *hook_name(int hook);
const char *stage_name(int stage);

// The result of one hook run: the value and which plugin gave it (-1: none
// answered other than -ENOTSUP).
struct HookResult {
	int ret = -ENOTSUP;
	int plugin = -1;
};

class PluginSet {
public:
	// host_hooks: the hook slots of the CRIU imitated (12, 13 or 15).
	explicit PluginSet(unsigned host_hooks = CR_PLUGIN_HOOK__MAX) : host_hooks_(host_hooks) {}
	PluginSet(const PluginSet &) = delete;
	PluginSet &operator=(const PluginSet &) = delete;
	// Without fini(), plugins are dlclose()d without their exit() hook.
	~PluginSet();

	// Loads one plugin file and calls its init(stage). On failure the
	// plugin is not kept; the caller aborts the run (CRIU does).
	amdcr::Status load(const std::string &path, int stage);
	// Every "*.so" in dir, in readdir order.
	amdcr::Status load_dir(const std::string &dir, int stage);

	// exit(stage, ret) for every plugin in load order, then dlclose.
	void fini(int stage, int ret);

	size_t size() const { return plugins_.size(); }
	const std::string &name(int i) const { return plugins_[static_cast<size_t>(i)].name; }

	// run_plugins(): `call(void *fn)` invokes one plugin's hook and returns
	// its result; `args` is for the log line.
	template <typename Fn, typename Call>
	HookResult run(int hook, const std::string &args, Call &&call)
	{
		HookResult r;
		for (size_t i = 0; i < plugins_.size(); i++) {
			void *fn = hook_of(i, hook);
			if (!fn)
				continue;
			const int ret = call(reinterpret_cast<Fn *>(fn));
			log_call(i, hook, args, ret);
			if (ret != -ENOTSUP) {
				r.ret = ret;
				r.plugin = static_cast<int>(i);
				return r;
			}
		}
		return r;
	}

private:
	struct Plugin {
		std::string path;
		std::string name;
		void *handle = nullptr;
		const cr_plugin_desc_t *desc = nullptr;
	};

	void *hook_of(size_t i, int hook) const;
	void log_call(size_t i, int hook, const std::string &args, int ret) const;

	void report_device_fds(int stage) const;
	unsigned host_hooks_;
	std::vector<Plugin> plugins_;
};

} // namespace host
