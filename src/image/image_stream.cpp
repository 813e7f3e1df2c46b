// SPDX-License-Identifier: GPL-2.0-only
#include "image/image_stream.h"

#include <fcntl.h>

#include <cerrno>
#include <vector>

namespace amdcr {

const char *ImageStreamer::socket_name(Mode mode)
{
	return mode == Mode::Capture ? "streamer-capture.sock" : "streamer-serve.sock";
}

Result<UniqueFd> ImageStreamer::open(const std::string &name) const
{
	if (name.empty() || name.find('/') != std::string::npos)
		return make_error(EINVAL, "%s: not a plain image file name", name.c_str());
	// CRIU's O_DUMP and O_RSTR (criu/include/image.h).
	const int flags = mode_ == Mode::Capture ? (O_WRONLY | O_CREAT | O_TRUNC) : O_RDONLY;
	// img_streamer_open takes a non-const char *: hand it a copy.
	std::vector<char> buf(name.begin(), name.end());
	buf.push_back('\0');
	const int fd = open_(buf.data(), flags);
	if (fd == -ENOENT)
		return make_error(ENOENT, "%s: the image streamer has no such file", name.c_str());
	if (fd < 0)
		return make_error(EIO, "%s: the image streamer did not %s it (img_streamer_open: %d; see CRIU's log)",
				  name.c_str(), mode_ == Mode::Capture ? "accept" : "serve", fd);
	// CRIU makes the pipe without O_CLOEXEC; the plugin's copy must not
	// leak into a restored task.
	::fcntl(fd, F_SETFD, FD_CLOEXEC);
	return UniqueFd(fd);
}

} // namespace amdcr
