// SPDX-License-Identifier: GPL-2.0-only
#include "plugins.h"

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "api.h"

namespace host {

const char *hook_name(int hook)
{
	static const char *const names[CR_PLUGIN_HOOK__MAX] = {
		"DUMP_UNIX_SK",	       "RESTORE_UNIX_SK",   "DUMP_EXT_FILE",
		"RESTORE_EXT_FILE",    "DUMP_EXT_MOUNT",    "RESTORE_EXT_MOUNT",
		"DUMP_EXT_LINK",       "HANDLE_DEVICE_VMA", "UPDATE_VMA_MAP",
		"RESUME_DEVICES_LATE", "PAUSE_DEVICES",	    "CHECKPOINT_DEVICES",
		"POST_FORKING",	       "RESTORE_INIT",	    "DUMP_DEVICES_LATE",
	};
	if (hook < 0 || hook >= CR_PLUGIN_HOOK__MAX)
		return "?";
	return names[hook];
}

const char *stage_name(int stage)
{
	switch (stage) {
	case CR_PLUGIN_STAGE__DUMP:
		return "DUMP";
	case CR_PLUGIN_STAGE__PRE_DUMP:
		return "PRE_DUMP";
	case CR_PLUGIN_STAGE__RESTORE:
		return "RESTORE";
	default:
		return "?";
	}
}

PluginSet::~PluginSet()
{
	for (auto it = plugins_.rbegin(); it != plugins_.rend(); ++it)
		dlclose(it->handle);
}

void *PluginSet::hook_of(size_t i, int hook) const
{
	const cr_plugin_desc_t *d = plugins_[i].desc;
	if (hook < 0 || static_cast<unsigned>(hook) >= d->max_hooks ||
	    static_cast<unsigned>(hook) >= host_hooks_)
		return nullptr;
	return d->hooks[hook];
}

void PluginSet::log_call(size_t i, int hook, const std::string &args, int ret) const
{
	logf(kInfo, "plugin %s: %s(%s) = %d\n", plugins_[i].name.c_str(), hook_name(hook),
	     args.c_str(), ret);
}

amdcr::Status PluginSet::load(const std::string &path, int stage)
{
	void *h = dlopen(path.c_str(), RTLD_LAZY);
	if (!h) {
		logf(kError, "Unable to load %s: %s\n", path.c_str(), dlerror());
		return amdcr::make_error(ENOENT, "cannot load %s", path.c_str());
	}
	auto *d = static_cast<const cr_plugin_desc_t *>(dlsym(h, "CR_PLUGIN_DESC"));
	if (!d) {
		// CRIU would synthesise a descriptor from cr_plugin_* symbols
		// (deprecated); the host does not.
		logf(kError, "Can't load plugin %s (no CR_PLUGIN_DESC)\n", path.c_str());
		dlclose(h);
		return amdcr::make_error(EINVAL, "no CR_PLUGIN_DESC in %s", path.c_str());
	}
	const char *name = d->name ? d->name : path.c_str();
	bool corrupted = false;
	if (d->version > CRIU_PLUGIN_VERSION) {
		logf(kDebug, "Plugin %s has version %x while max %x supported\n", name, d->version,
		     CRIU_PLUGIN_VERSION);
		corrupted = true;
	} else if (d->max_hooks > host_hooks_) {
		logf(kDebug, "Plugin %s has %u assigned while max %u supported\n", name,
		     d->max_hooks, host_hooks_);
		corrupted = true;
	}
	if (corrupted) {
		logf(kError, "Corrupted plugin %s\n", path.c_str());
		dlclose(h);
		return amdcr::make_error(EINVAL, "corrupted plugin %s", path.c_str());
	}

	logf(kDebug, "Plugin \"%s\" (version %u hooks %u) from %s\n", name, d->version,
	     d->max_hooks, path.c_str());
	for (unsigned i = 0; i < d->max_hooks; i++)
		if (d->hooks[i])
			logf(kDebug, "\t%4u -> %s\n", i, hook_name(static_cast<int>(i)));

	if (d->init) {
		const int ret = d->init(stage);
		logf(kInfo, "plugin %s: init(%s) = %d\n", name, stage_name(stage), ret);
		if (ret) {
			logf(kError, "Failed in init(%d) of \"%s\"\n", stage, name);
			// name lives in the plugin: format before dlclose().
			amdcr::Error err = amdcr::make_error(EINVAL, "init of %s failed", name);
			dlclose(h);
			return err;
		}
	}
	plugins_.push_back(Plugin{path, name, h, d});
	return amdcr::ok_status();
}

amdcr::Status PluginSet::load_dir(const std::string &dir, int stage)
{
	DIR *d = opendir(dir.c_str());
	if (!d) {
		log_perror("Unable to open directory %s", dir.c_str());
		return amdcr::errno_error(errno, "opendir " + dir);
	}
	std::vector<std::string> paths;
	errno = 0;
	while (struct dirent *de = readdir(d)) {
		const size_t len = std::strlen(de->d_name);
		if (len < 3 || std::strcmp(de->d_name + len - 3, ".so") != 0)
			continue;
		paths.push_back(dir + "/" + de->d_name);
	}
	const int err = errno;
	closedir(d);
	if (err) {
		logf(kError, "Unable to read the libraries directory: %s\n", std::strerror(err));
		return amdcr::errno_error(err, "readdir " + dir);
	}
	for (const std::string &p : paths) {
		auto st = load(p, stage);
		if (!st)
			return st;
	}
	return amdcr::ok_status();
}

void PluginSet::fini(int stage, int ret)
{
	for (Plugin &p : plugins_) {
		if (p.desc->exit) {
			logf(kInfo, "plugin %s: exit(%s, %d)\n", p.name.c_str(), stage_name(stage), ret);
			p.desc->exit(stage, ret);
		}
	}
	report_device_fds(stage);
	for (auto it = plugins_.rbegin(); it != plugins_.rend(); ++it)
		dlclose(it->handle);
	plugins_.clear();
}

// After exit(), the host holds no device file of its own (it closes its
// copies of the tasks' fds as soon as the hooks return), so a device fd
// still open now was left by a plugin. Under the emulator, readlink names
// emulated files like the real ones.
void PluginSet::report_device_fds(int stage) const
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return;
	const int self = dirfd(d);
	unsigned leaked = 0;
	while (struct dirent *de = readdir(d)) {
		const int fd = std::atoi(de->d_name);
		if (de->d_name[0] == '.' || fd == self)
			continue;
		char link[256] = {};
		const std::string path = std::string("/proc/self/fd/") + de->d_name;
		if (readlink(path.c_str(), link, sizeof(link) - 1) < 0)
			continue;
		const std::string l = link;
		if (l.rfind("/dev/kfd", 0) == 0 || l.rfind("/dev/dri/", 0) == 0 || l.rfind("/dmabuf", 0) == 0 ||
		    l.rfind("/memfd:kfdemu", 0) == 0) {
			logf(kError, "fd %d (%s) is still open after exit(%s): leaked by a plugin\n", fd,
			     link, stage_name(stage));
			leaked++;
		}
	}
	closedir(d);
	if (!leaked)
		logf(kDebug, "no device fds left open after exit(%s)\n", stage_name(stage));
}

} // namespace host
