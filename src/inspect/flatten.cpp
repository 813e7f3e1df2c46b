// SPDX-License-Identifier: GPL-2.0-only
#include "inspect/flatten.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <set>
#include <vector>

#include "base/file_io.h"
#include "image/content_checksum.h"
#include "image/image_names.h"
#include "image/kfd_chain.h"
#include "image/kfd_image.h"
#include "image/pages_file.h"

namespace amdcr::inspect {

namespace {

constexpr size_t kCopyBytes = 4 << 20; // the one buffer of a flatten

// The regular files of `dir`, sorted.
Result<std::vector<std::string>> regular_files(const ImageDir &dir)
{
	auto all = dir.names();
	if (!all)
		return std::move(all).error().context("listing the image directory");
	std::vector<std::string> names;
	for (std::string &name : *all) {
		struct stat st{};
		if (::fstatat(dir.fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			names.push_back(std::move(name));
	}
	return names;
}

Result<ImageDir> empty_destination(const std::string &path)
{
	if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST)
		return errno_error(errno, "creating " + path);
	auto dir = ImageDir::open(path);
	if (!dir)
		return dir;
	auto names = dir->names();
	if (!names)
		return std::move(names).error().context("listing " + path);
	if (!names->empty())
		return make_error(EEXIST, "%s: not empty (%s): flatten writes a new checkpoint", path.c_str(),
				  names->front().c_str());
	return dir;
}

Status pump(ByteSource &from, ByteSink &to, std::vector<uint8_t> &buf)
{
	while (from.remaining() > 0) {
		const size_t n = static_cast<size_t>(std::min<uint64_t>(from.remaining(), buf.size()));
		if (auto st = from.read(buf.data(), n); !st)
			return st;
		if (auto st = to.write(buf.data(), n); !st)
			return st;
	}
	return ok_status();
}

// A pages file as it is (its holes and its seal kept).
Status copy_pages(const ImageDir &src, const ImageDir &dst, const std::string &name, std::vector<uint8_t> &buf)
{
	auto r = PagesReader::open(src, name);
	if (!r)
		return std::move(r).error();
	auto w = PagesWriter::create(dst, name, r->payload_size(), r->seal());
	if (!w)
		return std::move(w).error();
	if (auto st = pump(*r, *w, buf); !st)
		return st;
	return w->commit();
}

Status copy_file(const ImageDir &src, const ImageDir &dst, const std::string &name, std::vector<uint8_t> &buf)
{
	auto in = src.open_read(name);
	if (!in)
		return std::move(in).error();
	auto out = dst.create(name);
	if (!out)
		return std::move(out).error();
	for (;;) {
		auto n = read_full(in->get(), buf.data(), buf.size());
		if (!n)
			return std::move(n).error().context(name);
		if (*n == 0)
			break;
		if (auto st = out->write(buf.data(), *n); !st)
			return st;
		if (*n < buf.size())
			break;
	}
	return out->commit();
}

// A link of a chain or a deduplicated image: its pages files complete,
// then the image without its chain and dedup fields.
Status flatten_kfd(const ImageDir &src, const ImageDir &dst, int id, KfdImage img, std::vector<uint8_t> &buf,
		   FlattenReport &rep)
{
	auto chain = resolve_chain_pages(src, id, img);
	if (!chain)
		return std::move(chain).error();
	for (const auto &[gpu, where] : *chain) {
		const std::string name = kfd_pages_image_name(id, gpu);
		ChainSource source(src, where);
		std::vector<VerifyingSource::Bo> bos;
		for (size_t i = 0; i < img.bos.size(); i++) {
			const KfdBo &b = img.bos[i];
			if (b.gpu_id == gpu && b.has_contents())
				bos.push_back({b.size, b.checksum ? &*b.checksum : nullptr,
					       strprintf("BO %zu at 0x%llx of %s", i, static_cast<unsigned long long>(b.addr),
							 kfd_image_name(id).c_str())});
		}
		VerifyingSource checked(source, std::move(bos));
		auto w = PagesWriter::create(dst, name, where.total, pages_seal(img.binding));
		if (!w)
			return std::move(w).error();
		if (auto st = pump(checked, *w, buf); !st)
			return st;
		if (auto st = w->commit(); !st)
			return st;
		for (const auto &s : where.segments) {
			const auto &f = where.files[s.file];
			rep.from_parents += f.dir.empty() ? 0 : s.length;
			rep.deduplicated += f.dir.empty() && s.file != 0 ? s.length : 0;
		}
		rep.files++;
	}
	rep.chains += img.parent ? 1 : 0;
	img.parent.reset();
	for (auto &b : img.bos) {
		b.from_parent.reset();
		b.dedup.reset();
	}
	if (auto st = write_kfd_image(dst, id, img); !st)
		return st;
	rep.files++;
	return ok_status();
}

// The CRIU file id of "amdgpu-kfd-<id>.img", or -1.
int kfd_id(const std::string &name)
{
	const std::string prefix = kKfdImagePrefix;
	if (!name.starts_with(prefix) || !name.ends_with(".img"))
		return -1;
	const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - 4);
	if (digits.empty() || digits.size() > 9 || !std::all_of(digits.begin(), digits.end(), ::isdigit))
		return -1;
	return std::atoi(digits.c_str());
}

} // namespace

Result<FlattenReport> flatten_checkpoint(const std::string &src_path, const std::string &dst_path)
{
	auto src = ImageDir::open(src_path);
	if (!src)
		return std::move(src).error();
	auto files = regular_files(*src);
	if (!files)
		return std::move(files).error().context(src_path);
	auto dst = empty_destination(dst_path);
	if (!dst)
		return std::move(dst).error();
	FlattenReport rep;
	std::vector<uint8_t> buf(kCopyBytes);
	std::set<std::string> done;
	for (const auto &name : *files) {
		const int id = kfd_id(name);
		if (id < 0)
			continue;
		auto img = read_kfd_image(*src, id);
		if (!img)
			return std::move(img).error().context(src_path);
		const bool dedup = std::any_of(img->bos.begin(), img->bos.end(), [](const KfdBo &b) { return b.dedup; });
		if (!img->parent && !dedup)
			continue; // copied as it is below
		for (const auto &d : img->devices)
			if (d.is_gpu())
				done.insert(kfd_pages_image_name(id, d.gpu_id));
		done.insert(name);
		if (auto st = flatten_kfd(*src, *dst, id, std::move(*img), buf, rep); !st)
			return std::move(st).error().context(src_path);
	}
	for (const auto &name : *files) {
		if (done.contains(name) || name.starts_with("."))
			continue;
		const bool pages = name.starts_with("amdgpu-pages-") || name.starts_with("amdgpu-drm-pages-");
		auto st = pages ? copy_pages(*src, *dst, name, buf) : copy_file(*src, *dst, name, buf);
		if (!st)
			return std::move(st).error().context(src_path);
		rep.files++;
	}
	if (auto present = src->exists(kParentLink); present && *present) {
		char real[PATH_MAX];
		if (::realpath((src_path + "/" + kParentLink).c_str(), real)) {
			if (::symlinkat(real, dst->fd(), kParentLink) != 0)
				return errno_error(errno, "linking " + dst_path + "/parent to " + real);
			rep.parent_link = real;
		}
	}
	return rep;
}

} // namespace amdcr::inspect
