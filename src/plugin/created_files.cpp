// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/created_files.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"

namespace amdcr {

void CreatedFiles::add(const std::string &name, dev_t dev, ino_t ino, const std::string &kept)
{
	const std::lock_guard lock(mu_);
	files_.push_back({name, dev, ino, kept});
}

void CreatedFiles::watch(ImageDir &dir)
{
	dir.set_commit_observer([this](const std::string &name, dev_t dev, ino_t ino, const std::string &kept) {
		add(name, dev, ino, kept);
	});
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
	// Newest first: a name committed twice gets its first file's kept one.
	for (auto f = files_.rbegin(); f != files_.rend(); ++f) {
		// Between this check and the unlink only someone who can
		// write the directory can swap the name: the file unlinked is
		// then theirs, never one outside the directory.
		struct stat st = {};
		if (::fstatat(dir.fd(), f->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
			r.gone++;
		} else if (st.st_dev != f->dev || st.st_ino != f->ino) {
			log_warn("%s; %s is no longer the file this dump wrote: left as it is", why, f->name.c_str());
			r.replaced++;
			continue; // its kept file stays hidden: the name is someone else's now
		} else if (::unlinkat(dir.fd(), f->name.c_str(), 0) != 0 && errno != ENOENT) {
			log_error("%s; removing %s: %s", why, f->name.c_str(), std::strerror(errno));
			r.failed++;
			continue;
		} else {
			r.removed++;
		}
		if (!f->kept.empty() && put_back(dir, *f, why))
			r.put_back++;
	}
	files_.clear();
	return r;
}

bool CreatedFiles::put_back(const ImageDir &dir, const File &f, const char *why)
{
	// RENAME_NOREPLACE: a file put under the name since is not replaced.
	if (::renameat2(dir.fd(), f.kept.c_str(), dir.fd(), f.name.c_str(), RENAME_NOREPLACE) == 0)
		return true;
	log_error("%s; putting the older %s back (from %s): %s", why, f.name.c_str(), f.kept.c_str(),
		  std::strerror(errno));
	return false;
}

void CreatedFiles::drop_kept(const ImageDir &dir)
{
	const std::lock_guard lock(mu_);
	for (const File &f : files_)
		if (!f.kept.empty() && ::unlinkat(dir.fd(), f.kept.c_str(), 0) != 0 && errno != ENOENT)
			log_warn("removing %s (the older %s this dump replaced): %s", f.kept.c_str(), f.name.c_str(),
				 std::strerror(errno));
	files_.clear();
}

} // namespace amdcr
