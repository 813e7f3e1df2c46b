// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/guardian_protocol.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <string_view>

#include "base/socket_fds.h"

namespace amdcr::guardian {

Status send_message(int chan, const Wire &w, std::span<const int> fds)
{
	if (auto st = send_with_fds(chan, &w, sizeof(w), fds); !st)
		return std::move(st).error().context("guardian");
	return ok_status();
}

bool well_formed(const Wire &w, size_t fds, Guardian::Stage stage)
{
	switch (static_cast<Kind>(w.kind)) {
	case Kind::Paused:
		return fds == 2 && stage == Guardian::Stage::Dump;
	case Kind::Pausing:
		return fds >= 2 && fds <= kMaxFds && stage == Guardian::Stage::Dump;
	case Kind::TempFile: {
		// Only a name of the directory itself, as ImageDir makes them
		// (".<name>.tmp-<hex>"): never a path, never another file.
		const std::string_view name(w.name, strnlen(w.name, sizeof(w.name)));
		return fds == 0 && stage == Guardian::Stage::Dump && name.size() < sizeof(w.name) &&
		       name.starts_with('.') && name.find('/') == std::string_view::npos &&
		       name.find(".tmp-") != std::string_view::npos;
	}
	case Kind::Task:
		return fds == 1 && stage == Guardian::Stage::Restore;
	case Kind::Unpaused:
	case Kind::Resumed:
		return fds == 0 && w.pid > 0;
	case Kind::Finished:
	case Kind::Started:
		return fds == 0;
	}
	return false;
}

int pidfd_open(pid_t pid)
{
	return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

int pidfd_send_signal(int pidfd, int sig)
{
	return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

} // namespace amdcr::guardian
