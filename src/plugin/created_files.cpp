// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/created_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace amdcr {

void CreatedFiles::add(const std::string &name, dev_t dev, ino_t ino)
{
	const std::lock_guard lock(mu_);
	files_.push_back({name, dev, ino});
}

void CreatedFiles::watch(ImageDir &dir)
{
	dir.set_commit_observer([this](const std::string &name, dev_t dev, ino_t ino) { add(name, dev, ino); });
}

size_t CreatedFiles::size() const
{
	const std::lock_guard lock(mu_);
	return files_.size();
}

std::vector<std::string> CreatedFiles::names() const
{
	const std::lock_guard lock(mu_);
	std::vector<std::string> out;
	out.reserve(files_.size());
	for (const File &f : files_)
		out.push_back(f.name);
	return out;
}

void CreatedFiles::clear()
{
	const std::lock_guard lock(mu_);
	files_.clear();
}

CreatedFiles::Removal CreatedFiles::remove_all(const ImageDir &dir, const char *why)
{
	const std::lock_guard lock(mu_);
	Removal r;
	for (const File &f : files_) {
		// Between this check and the unlink only someone who can
		// write the directory can swap the name: the file unlinked is
		// then theirs, never one outside the directory.
		struct stat st = {};
		if (::fstatat(dir.fd(), f.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
			r.gone++;
			continue;
		}
		if (st.st_dev != f.dev || st.st_ino != f.ino) {
			log_warn("%s; %s is no longer the file this dump wrote: left as it is", why, f.name.c_str());
			r.replaced++;
			continue;
		}
		if (::unlinkat(dir.fd(), f.name.c_str(), 0) != 0 && errno != ENOENT) {
			log_error("%s; removing %s: %s", why, f.name.c_str(), std::strerror(errno));
			r.failed++;
			continue;
		}
		r.removed++;
	}
	files_.clear();
	return r;
}

} // namespace amdcr
