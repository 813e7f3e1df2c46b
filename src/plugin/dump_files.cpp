// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/dump_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "base/log.h"
#include "image/criu_images.h"
#include "image/image_names.h"
#include "plugin/criu_api.h"

namespace amdcr {

Result<ImageDir> DumpFiles::image_dir()
{
	auto dir = session_image_dir(env_);
	if (dir) {
		if (on_open_)
			on_open_(*dir);
		created_.watch(*dir);
	}
	return dir;
}

Result<DumpBinding> DumpFiles::binding_for(int id)
{
	if (!dump_id_) {
		auto drawn = new_dump_id();
		if (!drawn)
			return std::move(drawn).error();
		dump_id_ = *drawn;
		log_debug("dump identity %s", dump_id_text(*dump_id_).c_str());
	}
	return DumpBinding{*dump_id_, static_cast<uint32_t>(id), true}; // its pages files sealed
}

void DumpFiles::add_to_inventory()
{
	if (in_inventory_)
		return;
	in_inventory_ = true;
	criu::add_inventory_plugin(kPluginName);
}

void DumpFiles::discard_created(const char *why)
{
	const size_t created = created_.size();
	if (created == 0)
		return;
	auto images = image_dir();
	if (!images) {
		log_error("%s, but its %zu image files cannot be removed: %s", why, created,
			  images.error().message().c_str());
		return;
	}
	if (images->streaming()) {
		// The streamer has them; CRIU fails the whole streamed dump.
		created_.clear();
		return;
	}
	const CreatedFiles::Removal r = created_.remove_all(*images, why);
	log_info("%s: removed the %zu GPU image files it had written (%zu replaced since, %zu gone, %zu not "
		 "removed) and put back the %zu older ones they had replaced; no other file of the directory "
		 "was touched",
		 why, r.removed, r.replaced, r.gone, r.failed, r.put_back);
}

void DumpFiles::drop_replaced()
{
	auto images = image_dir();
	if (!images || images->streaming())
		return;
	const std::vector<std::string> written = created_.names();
	created_.drop_kept(*images);
	drop_stale_kept(*images, written);
}

void DumpFiles::drop_stale_kept(const ImageDir &dir, const std::vector<std::string> &written)
{
	auto names = dir.names();
	if (!names || !dump_id_)
		return;
	std::string removed; // "a (dump X), b (dump Y)"
	size_t count = 0;
	for (const std::string &n : *names) {
		const auto original = kept_original(n);
		if (!original || std::find(written.begin(), written.end(), *original) == written.end())
			continue;
		auto carried = carried_dump_id(dir, n, *original);
		if (!carried || !*carried) {
			log_warn("%s: an older %s kept by an earlier dump that did not end (killed?), left as it is: "
				 "it carries no dump identity of this plugin (%s), so nothing proves it an earlier "
				 "dump's GPU file; remove it if it is",
				 n.c_str(), original->c_str(),
				 carried ? "none" : carried.error().message().c_str());
			continue;
		}
		if (**carried == *dump_id_)
			continue; // this dump's own: drop_kept's
		if (::unlinkat(dir.fd(), n.c_str(), 0) == 0)
			removed += (count++ ? ", " : "") + n + " (dump " + dump_id_text(**carried) + ")";
		else if (errno != ENOENT)
			log_warn("removing %s, an older %s an earlier dump kept: %s", n.c_str(), original->c_str(),
				 std::strerror(errno));
	}
	if (count > 0)
		log_info("removed %zu files an earlier dump into this directory kept and never put back (it did not "
			 "end: killed?), each an older GPU file of a name this dump wrote: %s",
			 count, removed.c_str());
}

void DumpFiles::write_manifest()
{
	if (!dump_id_ || created_.size() == 0)
		return;
	auto dir = image_dir();
	if (dir && dir->streaming()) {
		log_debug("streamed: no %s (CRIU's images reach the streamer only)", kDumpManifestName);
		return;
	}
	Status st = dir ? ok_status() : Status(std::move(dir).error());
	if (st) {
		auto criu = digest_criu_images(*dir);
		std::vector<std::string> gpu = created_.names();
		std::sort(gpu.begin(), gpu.end());
		gpu.erase(std::unique(gpu.begin(), gpu.end()), gpu.end());
		st = criu ? write_dump_manifest(*dir, DumpManifest{*dump_id_, std::move(*criu), std::move(gpu)})
			  : Status(std::move(criu).error());
	}
	if (!st)
		log_error("writing %s: %s: a restore of this checkpoint will refuse its GPU images",
			  kDumpManifestName, st.error().message().c_str());
	else
		log_debug("%s binds dump %s to CRIU's images", kDumpManifestName, dump_id_text(*dump_id_).c_str());
}

} // namespace amdcr
