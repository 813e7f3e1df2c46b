// SPDX-License-Identifier: GPL-2.0-only
//
// Shared by the libFuzzer targets of tests/fuzz: a failed property aborts
// (libFuzzer keeps the input as a crash), and a scratch image directory
// per process for the targets that go through files, with the cut of one
// input into several files.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>

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

// The input of a target that writes N files, cut into their contents: each
// of the first N-1 a W-byte LE length n and then n bytes (fewer where the
// input ends first; empty where under W bytes are left), the last one what
// remains. W is 2 where every file fits 64 KiB, 4 where one may not.
template <size_t N, size_t W = 2>
std::array<std::span<const uint8_t>, N> cut_input(const uint8_t *data, size_t size)
{
	static_assert(W == 2 || W == 4);
	std::span<const uint8_t> in(data, size);
	std::array<std::span<const uint8_t>, N> pieces;
	for (size_t i = 0; i + 1 < N; i++) {
		if (in.size() < W) {
			pieces[i] = {};
			continue;
		}
		size_t len = 0;
		for (size_t b = 0; b < W; b++)
			len |= size_t{in[b]} << (8 * b);
		const size_t n = std::min(len, in.size() - W);
		pieces[i] = in.subspan(W, n);
		in = in.subspan(W + n);
	}
	pieces[N - 1] = in;
	return pieces;
}

// scratch() emptied, then holding each (name, bytes) of `files`.
inline const ScratchDir &scratch_files(
	std::initializer_list<std::pair<std::string, std::span<const uint8_t>>> files)
{
	const ScratchDir &dir = scratch();
	dir.clear();
	for (const auto &[name, bytes] : files)
		dir.put(name, bytes);
	return dir;
}

} // namespace fuzz
