// SPDX-License-Identifier: GPL-2.0-only
//
// CRIU's image streamer (criu dump/restore --stream), as the image layer
// sees it. In stream mode CRIU is connected to criu-image-streamer (or a
// program speaking its protocol) through a socket in the image directory
// (streamer-capture.sock at dump, streamer-serve.sock at restore), and
// every image file is a pipe that CRIU's exported
//
//     int img_streamer_open(char *filename, int flags)
//
// obtains from the streamer: flags O_WRONLY|O_CREAT|O_TRUNC (CRIU's O_DUMP)
// when capturing, O_RDONLY (O_RSTR) when serving; it returns the pipe's fd,
// -ENOENT when the streamer has no such file (serve only), -1 on any other
// error (CRIU logs why). CRIU's flags must match its mode: the wrong ones
// crash CRIU, so ImageStreamer only ever passes the mode's own.
//
// What follows for image files (see image_dir.h, framing.h, pages_file.h):
// written once, front to back; read once, front to back, to the end (the
// real streamer serves a file once and fails when its pipe is closed
// early); no seeking, no rename, no size from fstat (the 8-byte header of
// every file gives it); no directory listing; no holes.
#pragma once

#include <string>

#include "base/result.h"
#include "base/unique_fd.h"

namespace amdcr {

class ImageStreamer {
public:
	using OpenFn = int(char *filename, int flags);
	enum class Mode { Capture, Serve };

	ImageStreamer(OpenFn *open, Mode mode) : open_(open), mode_(mode) {}

	Mode mode() const { return mode_; }
	// The socket CRIU connects to in `mode` (a file of the image directory).
	static const char *socket_name(Mode mode);

	// The pipe of image file `name`: its write end when capturing, its read
	// end when serving. ENOENT (with a message naming the file) when the
	// streamer does not have it; EIO for any other failure.
	Result<UniqueFd> open(const std::string &name) const;

private:
	OpenFn *open_ = nullptr;
	Mode mode_ = Mode::Capture;
};

} // namespace amdcr
