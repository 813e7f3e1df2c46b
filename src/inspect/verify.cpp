// SPDX-License-Identifier: GPL-2.0-only
#include "inspect/verify.h"

#include <algorithm>
#include <cinttypes>
#include <map>
#include <optional>
#include <set>

#include "image/binding.h"
#include "image/content_checksum.h"
#include "image/image_names.h"
#include "image/image_set.h"
#include "image/kfd_chain.h"
#include "image/pages_file.h"

namespace amdcr::inspect {

namespace {

class Verifier {
public:
	Verifier(const Checkpoint &ck, bool require_manifest)
		: ck_(ck), require_manifest_(require_manifest), buf_(kVerifyReadBytes)
	{
	}

	VerifyReport run() &&
	{
		if (ck_.criu_error)
			r_.warnings.push_back({"files.img/pstree.img", *ck_.criu_error +
									   ": the images are not checked against CRIU's"});
		for (const auto &l : ck_.kfd)
			kfd(l);
		for (const auto &l : ck_.render)
			render(l);
		for (const auto &l : ck_.dmabuf) {
			if (l.image && l.integrity == Integrity::Verified && part_of_checkpoint(l))
				r_.sealed++;
			dmabuf(l);
		}
		// As the restore: the images CRIU restores come from one dump.
		size_t differing = 0;
		if (auto st = check_one_dump(bound_, &differing); !st)
			r_.problems.push_back({bound_[differing].name, st.error().message()});
		else if (!bound_.empty())
			bound_to_criu();
		restorable();
		checked_.insert(kDumpManifestName);
		leftovers();
		std::sort(r_.good.begin(), r_.good.end());
		return std::move(r_);
	}

private:
	void problem(const std::string &file, const Error &e) { r_.problems.push_back({file, e.message()}); }

	// An image of a file CRIU does not restore (its files.img) is no part
	// of the checkpoint: a warning, as the restore ignores it.
	template <typename Image>
	bool part_of_checkpoint(const Loaded<Image> &l) const
	{
		return !ck_.criu || ck_.criu->ext_file_ids.contains(static_cast<uint32_t>(l.id));
	}

	template <typename Image>
	bool decoded(const Loaded<Image> &l)
	{
		checked_.insert(l.file);
		if (!part_of_checkpoint(l)) {
			r_.warnings.push_back({l.file, strprintf("CRIU restores no file %d from this checkpoint "
								 "(files.img): not part of it; a restore ignores it",
								 l.id)});
			extra_ids_.insert(l.id);
			return false;
		}
		if (l.image) {
			bound_.push_back({l.file, l.image->binding});
			return true;
		}
		problem(l.file, l.image.error());
		failed_ids_.insert(l.id);
		return false;
	}

	// Reads the whole payload of a pages file that the set check found
	// well-formed, through the checksums of its BOs when it has any (an I/O
	// error, a file shrinking or a chunk not matching is a problem).
	bool read_through(const std::string &file)
	{
		auto reader = PagesReader::open(ck_.dir, file);
		if (!reader) {
			problem(file, reader.error());
			return false;
		}
		ByteSource *source = &*reader;
		std::optional<VerifyingSource> checked;
		if (auto it = checked_bos_.find(file); it != checked_bos_.end())
			source = &checked.emplace(*reader, it->second);
		while (source->remaining() > 0) {
			const size_t n = static_cast<size_t>(std::min<uint64_t>(source->remaining(), buf_.size()));
			if (auto st = source->read(buf_.data(), n); !st) {
				problem(file, st.error());
				return false;
			}
			r_.bytes_read += n;
		}
		if (checked)
			r_.bytes_checksummed += checked->verified_bytes();
		r_.good.push_back(file);
		return true;
	}

	// The set check of one metadata image, then every pages file it names.
	template <typename Image>
	void with_pages(const Loaded<Image> &l, const Status &set_check,
			const std::vector<std::string> &pages)
	{
		for (const auto &p : pages)
			checked_.insert(p);
		if (!set_check) {
			problem(l.file, set_check.error());
			failed_ids_.insert(l.id);
			return;
		}
		r_.good.push_back(l.file);
		for (const auto &p : pages) {
			auto present = ck_.dir.exists(p);
			if (present && *present)
				read_through(p);
		}
	}

	// As the restore (at its start, and again at RESTORE_EXT_FILE in the
	// task CRIU restores the file in): KFD file `id` dumped from `pid` must
	// be restored in that task, the one CRIU's fd tables name
	// (read_ext_file_restorers). Where CRIU's images cannot tell, a warning
	// says the check is not made.
	Status restored_in_its_task(int id, uint32_t pid)
	{
		if (!ck_.criu || ck_.dir.streaming())
			return ok_status();
		if (!restorers_) {
			auto r = read_ext_file_restorers(ck_.dir, ck_.criu->pids);
			restorers_.emplace(r ? std::move(*r) : std::nullopt);
			if (!r || !*restorers_)
				r_.warnings.push_back({"ids-*.img/fdinfo-*.img",
						       (r ? std::string("a task's ids or fdinfo image is missing")
							  : r.error().message()) +
							       ": which task restores each KFD file (its image's pid) is "
							       "not checked (the restore checks it in the task)"});
		}
		const auto &known = *restorers_;
		if (!known)
			return ok_status();
		return check_kfd_file_restorer(*known, static_cast<uint32_t>(id), pid);
	}

	void kfd(const Loaded<KfdImage> &l)
	{
		if (!decoded(l))
			return;
		const KfdImage &img = *l.image;
		if (ck_.criu && !ck_.criu->pids.contains(img.pid)) {
			problem(l.file, make_error(EINVAL, "dumped from pid %u, which is no task of this checkpoint "
							   "(pstree.img): the image comes from another checkpoint",
						   img.pid));
			failed_ids_.insert(l.id);
			return;
		}
		if (auto st = restored_in_its_task(l.id, img.pid); !st) {
			problem(l.file, st.error());
			failed_ids_.insert(l.id);
			return;
		}
		std::vector<std::string> pages;
		for (const KfdDevice &d : img.devices)
			if (d.is_gpu())
				pages.push_back(kfd_pages_image_name(l.id, d.gpu_id));
		// Each pages file read through its BOs' checksums (those the image
		// has: none in upstream's images).
		for (const KfdDevice &d : img.devices) {
			if (!d.is_gpu())
				continue;
			auto &bos = checked_bos_[kfd_pages_image_name(l.id, d.gpu_id)];
			for (size_t i = 0; i < img.bos.size(); i++) {
				const KfdBo &b = img.bos[i];
				if (b.gpu_id != d.gpu_id || !b.has_contents())
					continue;
				bos.push_back({b.size, b.checksum ? &*b.checksum : nullptr,
					       strprintf("BO %zu at 0x%" PRIx64 " of %s", i, b.addr, l.file.c_str())});
			}
		}
		if (l.integrity == Integrity::Verified)
			r_.sealed++;
		const bool dedup = std::any_of(img.bos.begin(), img.bos.end(), [](const KfdBo &b) { return b.dedup; });
		if (img.parent || dedup) {
			chain(l, pages);
			return;
		}
		with_pages(l, validate_kfd_image_set(ck_.dir, l.id, img), pages);
	}

	// A link of a chain (image/kfd_chain.h) or a deduplicated image
	// (image/chunk_index.h): the chain resolved as the restore resolves
	// it, then each GPU's bytes read from the files holding them, through
	// the newest image's checksums.
	void chain(const Loaded<KfdImage> &l, const std::vector<std::string> &pages)
	{
		for (const auto &p : pages)
			checked_.insert(p);
		const KfdImage &img = *l.image;
		Status st = validate_kfd_image_set(ck_.dir, l.id, img);
		auto resolved = st ? resolve_chain_pages(ck_.dir, l.id, img) : Result<std::map<uint32_t, ChainPages>>(st.error());
		if (!resolved) {
			problem(l.file, resolved.error());
			failed_ids_.insert(l.id);
			return;
		}
		r_.good.push_back(l.file);
		for (const auto &[gpu, where] : *resolved) {
			const std::string file = kfd_pages_image_name(l.id, gpu);
			ChainSource source(ck_.dir, where);
			VerifyingSource checked(source, checked_bos_[file]);
			if (read_all(file, checked))
				r_.good.push_back(file + strprintf(" (%s: %zu bytes%s)",
								   img.parent ? "with its parents" : "with the chunks stored elsewhere",
								   static_cast<size_t>(where.total),
								   dedup_text(img, gpu).c_str()));
			r_.bytes_checksummed += checked.verified_bytes();
		}
	}

	// ", 1.00 MiB of them (25.0%) deduplicated" for gpu's BOs of `img`.
	static std::string dedup_text(const KfdImage &img, uint32_t gpu)
	{
		uint64_t held = 0, saved = 0;
		for (const KfdBo &b : img.bos)
			if (b.gpu_id == gpu && b.has_contents()) {
				held += b.size;
				saved += b.dedup ? b.dedup->bytes(b.size) : 0;
			}
		if (!saved)
			return "";
		return strprintf(", %" PRIu64 " of them (%.1f%%) stored once elsewhere in the checkpoint", saved,
				 100.0 * static_cast<double>(saved) / static_cast<double>(held));
	}

	bool read_all(const std::string &file, ByteSource &source)
	{
		while (source.remaining() > 0) {
			const size_t n = static_cast<size_t>(std::min<uint64_t>(source.remaining(), buf_.size()));
			if (auto st = source.read(buf_.data(), n); !st) {
				problem(file, st.error());
				return false;
			}
			r_.bytes_read += n;
		}
		return true;
	}

	// A dma-buf image, and the pages file of its BO when it wrote the
	// contents itself (the first file of the dump holding the BO).
	void dmabuf(const Loaded<DmabufImage> &l)
	{
		if (!decoded(l))
			return;
		std::vector<std::string> pages;
		if (const auto &s = l.image->shared;
		    s && s->has_contents() && s->contents_id == static_cast<uint32_t>(l.id)) {
			pages.push_back(drm_pages_image_name(l.id, s->contents_minor, s->contents_index));
			// Read through the checksums of its shared BO entry.
			checked_bos_[pages.back()] = {{s->size, s->checksum ? &*s->checksum : nullptr,
						       strprintf("shared BO %u of %s", s->id, l.file.c_str())}};
		}
		with_pages(l, validate_dmabuf_image_set(ck_.dir, l.id, *l.image), pages);
	}

	void render(const Loaded<RenderNodeImage> &l)
	{
		if (!decoded(l))
			return;
		const RenderNodeImage &img = *l.image;
		std::vector<std::string> pages;
		const auto where = render_pages_layout(img, l.id);
		for (size_t i = 0; i < img.bos.size(); i++) {
			if (!where[i])
				continue;
			// Each BO in a file of its own, read through its checksums.
			const DrmBo &b = img.bos[i];
			pages.push_back(where[i]->file);
			checked_bos_[where[i]->file] = {
				{b.size, b.checksum ? &*b.checksum : nullptr,
				 strprintf("BO %zu (GEM handle %u) of %s", i, b.handle, l.file.c_str())}};
		}
		if (l.integrity == Integrity::Verified)
			r_.sealed++;
		with_pages(l, validate_render_image_set(ck_.dir, l.id, img), pages);
	}

	// The CRIU file id in a pages file name "<prefix><id>-...", or -1.
	static int pages_id(const std::string &name, std::string_view prefix)
	{
		if (!name.starts_with(prefix))
			return -1;
		int id = 0;
		size_t i = prefix.size();
		for (; i < name.size() && i < prefix.size() + 9 && name[i] >= '0' && name[i] <= '9'; i++)
			id = id * 10 + (name[i] - '0');
		return i > prefix.size() && i < name.size() && name[i] == '-' ? id : -1;
	}

	// As the restore: the images and their manifest were dumped with
	// CRIU's images in the directory (image/binding.h).
	void bound_to_criu()
	{
		std::string unbound;
		auto st = check_bound_to_criu(ck_.dir, bound_dump_id(bound_), bound_names(bound_), require_manifest_,
					      &unbound);
		if (!st)
			r_.problems.push_back({kDumpManifestName, st.error().message()});
		else if (!unbound.empty())
			r_.warnings.push_back({kDumpManifestName, unbound});
		else if (bound_dump_id(bound_) && !ck_.dir.streaming())
			r_.good.push_back(kDumpManifestName);
	}

	// As the restore, before any GPU state: every imported BO held by
	// files of the checkpoint, every render node mapping of CRIU's tasks
	// given back by an image (image/image_set.h).
	void restorable()
	{
		std::map<uint32_t, uint32_t> holders; // shared BO id -> files holding it
		RestorableMappings mappings;
		for (const auto &l : ck_.kfd)
			if (l.image && part_of_checkpoint(l))
				mappings.add(*l.image);
		for (const auto &l : ck_.render) {
			if (!l.image || !part_of_checkpoint(l))
				continue;
			mappings.add(l.file, *l.image);
			for (const DrmBo &bo : l.image->bos)
				if (bo.shared)
					holders[bo.shared->id]++;
		}
		for (const auto &l : ck_.dmabuf)
			if (l.image && part_of_checkpoint(l) && l.image->shared)
				holders[l.image->shared->id]++;
		for (const auto &l : ck_.render)
			if (l.image && part_of_checkpoint(l))
				if (auto st = check_imports_held(l.file, *l.image, [&](uint32_t id) { return holders[id]; });
				    !st)
					problem(l.file, st.error());
		if (!ck_.criu || ck_.dir.streaming() || !ck_.has_images())
			return;
		auto maps = read_render_mappings(ck_.dir, ck_.criu->pids);
		if (!maps) {
			problem("mm-*.img", maps.error());
			return;
		}
		const CriuRenderMapping *uncovered = nullptr;
		if (auto st = mappings.check(*maps, &uncovered); !st)
			problem(strprintf("mm-%u.img", uncovered->pid), st.error());
	}

	// The kept file `kept` (image/image_dir.h, kept_name) of `original`:
	// what it is and what becomes of it.
	std::string kept_file_warning(const std::string &kept, const std::string &original) const
	{
		auto carried = carried_dump_id(ck_.dir, kept, original);
		const std::string whose = carried && *carried
						  ? "of dump " + dump_id_text(**carried) + ": the next dump into this "
						    "directory that writes " + original + " removes it"
						  : "it carries no dump identity of this plugin: the next dump leaves it, "
						    "with a warning";
		return "an older " + original +
		       " that a dump replacing it kept and did not put back or remove (it did not end: killed?); "
		       "not part of this checkpoint, a restore ignores it; " + whose;
	}

	void leftovers()
	{
		static constexpr std::string_view kPages[] = {"amdgpu-pages-", "amdgpu-drm-pages-"};
		for (const auto &f : ck_.amdgpu_files) {
			if (checked_.count(f))
				continue;
			if (const auto original = kept_original(f)) {
				r_.warnings.push_back({f, kept_file_warning(f, *original)});
				continue;
			}
			if (f.starts_with(".")) {
				r_.warnings.push_back({f, "temporary file of an interrupted write"});
				continue;
			}
			bool pages = false;
			for (auto prefix : kPages) {
				const int id = pages_id(f, prefix);
				if (id < 0)
					continue;
				pages = true;
				if (failed_ids_.count(id) || extra_ids_.count(id))
					continue; // its image is already reported
				r_.problems.push_back({f, "pages file that no image refers to (is its "
							  "kfd or renderD image missing?)"});
			}
			if (!pages)
				r_.warnings.push_back({f, "not an amdgpu image name this tool knows"});
		}
	}

	const Checkpoint &ck_;
	const bool require_manifest_;
	std::vector<uint8_t> buf_;
	VerifyReport r_;
	std::set<std::string> checked_;
	std::set<int> failed_ids_;
	std::set<int> extra_ids_;	  // images of files CRIU does not restore
	std::vector<BoundImage> bound_; // the dump identity of each decoded image
	// Which task CRIU restores each EXT file in (read once; nullopt inside:
	// CRIU's images cannot tell).
	std::optional<std::optional<std::map<uint32_t, uint32_t>>> restorers_;
	// Per pages file: its BOs in file order, with their checksums.
	std::map<std::string, std::vector<VerifyingSource::Bo>> checked_bos_;
};

} // namespace

VerifyReport verify_checkpoint(const Checkpoint &ck, bool require_manifest)
{
	return Verifier(ck, require_manifest).run();
}

std::string format_verify(const VerifyReport &r, bool verbose)
{
	std::string o;
	if (verbose)
		for (const auto &f : r.good)
			o += "ok " + f + "\n";
	for (const auto &p : r.problems)
		o += "BAD " + p.file + ": " + p.message + "\n";
	for (const auto &w : r.warnings)
		o += "warning: " + w.file + ": " + w.message + "\n";
	o += strprintf("%zu files good, %zu problems, %zu warnings; %zu sealed images; %" PRIu64
		       " bytes of contents read, %" PRIu64 " of them matched their checksums\n",
		       r.good.size(), r.problems.size(), r.warnings.size(), r.sealed, r.bytes_read,
		       r.bytes_checksummed);
	return o;
}

} // namespace amdcr::inspect
