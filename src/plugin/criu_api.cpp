// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/criu_api.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <algorithm>
#include <cstring>
#include <string_view>

#include "amdgpu_plugin/criu_plugin_abi.h"

namespace amdcr::criu {
namespace {

template <typename Fn>
Fn *lookup(const char *symbol)
{
	return reinterpret_cast<Fn *>(dlsym(RTLD_DEFAULT, symbol));
}

// Whether `fd` is a connected Unix stream socket whose peer is bound to a
// path whose last component is `name`.
bool connected_to_socket_named(int fd, std::string_view name)
{
	struct stat st {};
	if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode))
		return false;
	int domain = 0, type = 0;
	socklen_t len = sizeof(domain);
	if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX)
		return false;
	len = sizeof(type);
	if (::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
		return false;
	sockaddr_un peer{};
	socklen_t plen = sizeof(peer);
	if (::getpeername(fd, reinterpret_cast<sockaddr *>(&peer), &plen) != 0 ||
	    plen <= offsetof(sockaddr_un, sun_path) || peer.sun_path[0] == '\0')
		return false; // unnamed or abstract peer
	const size_t n = ::strnlen(peer.sun_path, plen - offsetof(sockaddr_un, sun_path));
	const std::string_view path(peer.sun_path, n);
	const size_t slash = path.rfind('/');
	return (slash == std::string_view::npos ? path : path.substr(slash + 1)) == name;
}

// Whether some fd of this process is connected to the streamer socket
// `name` (see image_streamer in the header for where CRIU keeps it).
bool has_connection_to(std::string_view name)
{
	constexpr int kSearched = 1 << 16;
	struct rlimit rl {};
	if (::getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return false;
	const int top = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 1 << 30));
	for (int fd = top - 1; fd >= std::max(0, top - kSearched); fd--)
		if (connected_to_socket_named(fd, name))
			return true;
	return false;
}

} // namespace

std::optional<ImageStreamer> image_streamer(int image_dir_fd)
{
	auto *open = lookup<ImageStreamer::OpenFn>("img_streamer_open");
	if (!open)
		return std::nullopt;
	for (auto mode : {ImageStreamer::Mode::Capture, ImageStreamer::Mode::Serve}) {
		const char *name = ImageStreamer::socket_name(mode);
		struct stat st {};
		if (::fstatat(image_dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(st.st_mode))
			continue;
		if (has_connection_to(name))
			return ImageStreamer(open, mode);
	}
	return std::nullopt;
}

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
	// bool check_and_remove_inventory_plugin(const char *name, size_t n),
	// in CRIU 4.x and criu-dev alike: it compares the first `n` bytes, so
	// `n` counts the terminating NUL too and only the exact name matches.
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

std::optional<int> fdstore_add(int fd)
{
	using Fn = int(int);
	auto *fn = lookup<Fn>("fdstore_add");
	if (!fn)
		return std::nullopt;
	const int id = fn(fd);
	if (id < 0)
		return std::nullopt;
	return id;
}

std::optional<int> fdstore_get(int id)
{
	using Fn = int(int);
	auto *fn = lookup<Fn>("fdstore_get");
	if (!fn)
		return std::nullopt;
	const int fd = fn(id);
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
