// SPDX-License-Identifier: GPL-2.0-only
//
// img-check: decodes a checkpoint's amdgpu images with the plugin's own
// image layer and prints, per KFD image, its devices and BO table with the
// checksum of each BO's contents in the pages files (testcommon/
// bo_checksum.h: the one the emulator reports for live BOs). With --manifest, also checks
// each workload BO's pattern in the pages files. A KFD image whose chunks
// are partly elsewhere (a chain's link, a deduplicated image) is read
// through its ChainPages, as a restore reads it.
//
//   img-check --images DIR [--manifest FILE]
// Exit 0: all images valid (and patterns intact); 1 otherwise.
#include <fcntl.h>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpu_workload.h"
#include "testcommon/bo_checksum.h"
#include "testcommon/pattern.h"
#include "image/image_dir.h"
#include "image/image_names.h"
#include "image/image_set.h"
#include "image/kfd_chain.h"
#include "image/kfd_image.h"
#include "image/pages_file.h"

using namespace amdcr;

namespace {

int fail(const std::string &msg)
{
	std::fprintf(stderr, "img-check: %s\n", msg.c_str());
	return 1;
}

struct Tally {
	int bad = 0;
	size_t patterns_ok = 0;
};

// BO `b`'s bytes, read next from `source`: their checksum as JSON text
// (nullopt: a read failed, said on stderr). With `m` (the workload's BO
// at b's address), its pattern is checked too, the outcome counted.
std::optional<std::string> read_bo(ByteSource &source, const KfdBo &b, const e2e::ManifestBo *m,
				   std::vector<unsigned char> &buf, Tally &tally)
{
	std::vector<unsigned char> whole;
	if (m)
		whole.resize(b.size);
	uint64_t h = testcommon::kBoChecksumBasis;
	for (uint64_t off = 0; off < b.size;) {
		const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), b.size - off));
		if (auto st = source.read(buf.data(), n); !st) {
			fail(st.error().message());
			return std::nullopt;
		}
		testcommon::fold_words(h, buf.data(), n); // buf: a multiple of 8 bytes
		if (m)
			std::copy(buf.begin(), buf.begin() + static_cast<long>(n), whole.begin() + static_cast<long>(off));
		off += n;
	}
	if (m) {
		const int64_t at = testcommon::check_pattern(whole.data(), std::min(m->fill, b.size), m->seed);
		if (at >= 0) {
			std::fprintf(stderr, "img-check: BO %#llx: pattern differs at offset %lld\n",
				     static_cast<unsigned long long>(b.addr), static_cast<long long>(at));
			tally.bad++;
		} else {
			tally.patterns_ok++;
		}
	}
	char text[32];
	std::snprintf(text, sizeof(text), "\"0x%016llx\"", static_cast<unsigned long long>(h));
	return std::string(text);
}

} // namespace

int main(int argc, char **argv)
{
	std::string dir_path, manifest_path;
	for (int i = 1; i + 1 < argc; i += 2) {
		const std::string a = argv[i];
		if (a == "--images")
			dir_path = argv[i + 1];
		else if (a == "--manifest")
			manifest_path = argv[i + 1];
	}
	if (dir_path.empty())
		return fail("usage: img-check --images DIR [--manifest FILE]");
	auto dir = ImageDir::open(dir_path);
	if (!dir)
		return fail(dir.error().message());

	e2e::Manifest manifest;
	std::map<uint64_t, const e2e::ManifestBo *> wanted;
	if (!manifest_path.empty()) {
		if (!e2e::read_manifest(manifest_path, &manifest))
			return fail("cannot read manifest " + manifest_path);
		for (const auto &b : manifest.bos)
			if (!b.gem) // GEM BOs are in render images (render_e2e.py checks those)
				wanted[b.addr] = &b;
	}

	Tally tally;
	std::printf("{\"kfd\": [");
	bool first_img = true;
	for (int id = 0; id < 1 << 16; id++) {
		auto exists = dir->exists(kfd_image_name(id));
		if (!exists || !*exists)
			continue;
		auto img = read_kfd_image(*dir, id);
		if (!img)
			return fail(img.error().message());
		if (auto st = validate_kfd_image_set(*dir, id, *img); !st)
			return fail(st.error().message());
		std::printf("%s\n {\"id\": %d, \"pid\": %u, \"devices\": [", first_img ? "" : ",", id, img->pid);
		first_img = false;
		bool first = true;
		for (const auto &d : img->devices) {
			std::printf("%s{\"node_id\": %u, \"gpu_id\": %u, \"minor\": %u}", first ? "" : ", ", d.node_id,
				    d.gpu_id, d.drm_render_minor);
			first = false;
		}
		std::printf("],\n  \"bos\": [");
		auto chain = resolve_chain_pages(*dir, id, *img);
		if (!chain)
			return fail(chain.error().message());
		std::map<uint32_t, std::unique_ptr<ByteSource>> readers;
		std::vector<unsigned char> buf(8 << 20);
		first = true;
		for (const auto &b : img->bos) {
			std::string fnv = "null";
			if (b.has_contents()) {
				auto it = readers.find(b.gpu_id);
				if (it == readers.end() && chain->contains(b.gpu_id)) {
					it = readers.emplace(b.gpu_id, std::make_unique<ChainSource>(*dir, chain->at(b.gpu_id)))
						     .first;
				} else if (it == readers.end()) {
					auto r = PagesReader::open_kfd(*dir, id, b.gpu_id, pages_seal(img->binding));
					if (!r)
						return fail(r.error().message());
					it = readers.emplace(b.gpu_id, std::make_unique<PagesReader>(std::move(*r))).first;
				}
				const auto w = wanted.find(b.addr);
				auto sum = read_bo(*it->second, b, w == wanted.end() ? nullptr : w->second, buf, tally);
				if (!sum)
					return 1;
				fnv = *sum;
				if (w != wanted.end())
					wanted.erase(w);
			}
			std::printf("%s\n   {\"addr\": %llu, \"size\": %llu, \"gpu_id\": %u, \"flags\": %u, \"fnv\": %s}",
				    first ? "" : ",", static_cast<unsigned long long>(b.addr),
				    static_cast<unsigned long long>(b.size), b.gpu_id, b.alloc_flags, fnv.c_str());
			first = false;
		}
		for (auto &[gpu, r] : readers)
			if (r->remaining() != 0) {
				std::fprintf(stderr, "img-check: %s: %llu bytes past the BO table\n",
					     kfd_pages_image_name(id, gpu).c_str(),
					     static_cast<unsigned long long>(r->remaining()));
				tally.bad++;
			}
		std::printf("]}");
	}
	std::printf("\n]}\n");
	if (!manifest_path.empty()) {
		for (const auto &[addr, m] : wanted) {
			std::fprintf(stderr, "img-check: manifest BO %#llx is in no KFD image\n",
				     static_cast<unsigned long long>(addr));
			tally.bad++;
		}
		std::fprintf(stderr, "img-check: %zu workload BOs hold their pattern in the pages files\n",
			     tally.patterns_ok);
	}
	return tally.bad ? 1 : 0;
}
