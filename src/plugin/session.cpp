// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/session.h"

#include "plugin/criu_api.h"

namespace amdcr {

Result<ImageDir> session_image_dir(const SessionEnv &env)
{
	std::optional<int> fd = env.image_dir_fd;
	if (!fd)
		fd = criu::image_dir_fd();
	if (!fd)
		return Error(EBADF, "no image directory: criu_get_image_dir() is not available");
	auto dir = ImageDir::borrow(*fd);
	if (auto streamer = criu::image_streamer(*fd))
		dir.set_streamer(*streamer);
	return dir;
}

CopySettings copy_settings(const SessionEnv &env, SharedCopies *copies, const std::atomic<bool> *cancel,
			   DeferredLog *deferred)
{
	CopySettings s;
	s.max_buffer_size = env.config.max_buffer_size;
	s.sdma_timeout_s = env.config.sdma_timeout_s;
	if (copies) {
		s.totals = &copies->totals;
		s.gate = &copies->gate;
	}
	s.cancel = cancel;
	s.log = deferred;
	return s;
}

} // namespace amdcr
