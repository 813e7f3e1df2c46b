// SPDX-License-Identifier: GPL-2.0-only
//
// Files a workload writes for its harness to wait on ("ready", a manifest,
// a role's description). The harness reads the process's fd table as soon
// as the name appears, so the name must appear only after the writer's fd
// is closed: the text goes to PATH.tmp, which is closed, then renamed.
// Written with fopen directly, the harness can see the file while its fd is
// still open and record it as one of the process's fds.
#pragma once

#include <cstdio>
#include <string>

namespace testcommon {

// Publishes `text` at `path` whole; false when any step failed.
inline bool publish_file(const std::string &path, const std::string &text = {})
{
	const std::string tmp = path + ".tmp";
	FILE *f = std::fopen(tmp.c_str(), "w");
	if (!f)
		return false;
	const bool written = std::fputs(text.c_str(), f) >= 0;
	const bool closed = std::fclose(f) == 0;
	return written && closed && std::rename(tmp.c_str(), path.c_str()) == 0;
}

} // namespace testcommon
