// SPDX-License-Identifier: GPL-2.0-only
//
// Shared by the libFuzzer targets of tests/fuzz: a failed property aborts
// (libFuzzer keeps the input as a crash), and a scratch image directory
// per process for the targets that go through files.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <string_view>

#include "base/file_io.h"
#include "base/unique_fd.h"
#include "image/image_dir.h"

namespace fuzz {

// Aborts with `what` when `cond` is false.
inline void require(bool cond, const char *what)
{
	if (!cond) {
		std::fprintf(stderr, "fuzz property violated: %s\n", what);
		std::abort();
	}
}

// A private temporary directory, removed (with its files) at exit.
class ScratchDir {
public:
	ScratchDir()
	{
		char tmpl[] = "/tmp/amdcr-fuzz.XXXXXX";
		require(::mkdtemp(tmpl) != nullptr, "mkdtemp");
		path_ = tmpl;
	}
	~ScratchDir()
	{
		clear();
		::rmdir(path_.c_str());
	}
	const std::string &path() const { return path_; }

	// Replaces `name` with `bytes`.
	void put(const std::string &name, std::span<const uint8_t> bytes) const
	{
		const std::string p = path_ + "/" + name;
		auto fd = amdcr::open_at(AT_FDCWD, p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		require(fd.ok(), "creating a scratch file");
		require(amdcr::write_full(fd->get(), bytes.data(), bytes.size()).ok(), "writing a scratch file");
	}
	// Removes every file of the directory (it holds no subdirectories).
	void clear() const
	{
		DIR *d = ::opendir(path_.c_str());
		require(d != nullptr, "opening the scratch directory");
		while (const dirent *e = ::readdir(d))
			if (std::string_view(e->d_name) != "." && std::string_view(e->d_name) != "..")
				::unlinkat(::dirfd(d), e->d_name, 0);
		::closedir(d);
	}

private:
	std::string path_;
};

// One ScratchDir for the whole fuzzing process (libFuzzer runs inputs one
// after another in one thread).
inline const ScratchDir &scratch()
{
	static const ScratchDir dir;
	return dir;
}

} // namespace fuzz
