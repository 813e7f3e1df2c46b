// SPDX-License-Identifier: GPL-2.0-only
//
// Helpers for the image layer tests: a temporary image directory, raw file
// access behind the image layer's back, and sample images.
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/result.h"
#include "image/binding.h"
#include "image/content_checksum.h"
#include "image/framing.h"
#include "image/from_parent.h"
#include "image/image_dir.h"
#include "image/kfd_chain.h"
#include "image/kfd_image.h"
#include "image/pages_file.h"
#include "image/render_image.h"
#include "testcommon/pattern.h"

namespace amdcr::test {

// Whether an error's message contains `what`.
inline bool mentions(const Error &e, const std::string &what)
{
	return e.message().find(what) != std::string::npos;
}

// The BOs of a complete dump's DeltaSink (no parent checksums: every byte
// written, every chunk hashed).
inline std::vector<DeltaSink::Bo> complete_bos(const std::vector<uint64_t> &sizes)
{
	std::vector<DeltaSink::Bo> out;
	for (uint64_t s : sizes)
		out.push_back({s, nullptr});
	return out;
}


// A fresh directory under $TMPDIR, removed (with its files) at scope exit.
class TempDir {
public:
	TempDir()
	{
		const char *base = std::getenv("TMPDIR");
		std::string tmpl = std::string(base && *base ? base : "/tmp") + "/amdcr-image-XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back('\0');
		if (::mkdtemp(buf.data()))
			path_ = buf.data();
	}
	TempDir(const TempDir &) = delete;
	TempDir &operator=(const TempDir &) = delete;
	~TempDir()
	{
		if (path_.empty())
			return;
		for (const auto &n : names())
			::unlink((path_ + "/" + n).c_str());
		::rmdir(path_.c_str());
	}

	bool ok() const { return !path_.empty(); }
	const std::string &path() const { return path_; }
	std::string file(const std::string &name) const { return path_ + "/" + name; }

	// Every entry but . and .., hidden ones included.
	std::vector<std::string> names() const
	{
		std::vector<std::string> out;
		DIR *d = ::opendir(path_.c_str());
		if (!d)
			return out;
		while (struct dirent *e = ::readdir(d)) {
			std::string n = e->d_name;
			if (n != "." && n != "..")
				out.push_back(n);
		}
		::closedir(d);
		return out;
	}

private:
	std::string path_;
};

inline bool write_raw(const std::string &path, const std::vector<uint8_t> &bytes)
{
	const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return false;
	size_t done = 0;
	while (done < bytes.size()) {
		const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
		if (n <= 0) {
			::close(fd);
			return false;
		}
		done += static_cast<size_t>(n);
	}
	return ::close(fd) == 0;
}

inline std::vector<uint8_t> read_raw(const std::string &path)
{
	std::vector<uint8_t> out;
	const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return out;
	uint8_t buf[65536];
	for (;;) {
		const ssize_t n = ::read(fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		out.insert(out.end(), buf, buf + n);
	}
	::close(fd);
	return out;
}

inline mode_t file_mode(const std::string &path)
{
	struct stat st = {};
	if (::stat(path.c_str(), &st) != 0)
		return 0;
	return st.st_mode & 07777;
}

// Header + payload, as upstream frames a file.
inline std::vector<uint8_t> framed(const std::vector<uint8_t> &payload)
{
	std::vector<uint8_t> out(kImageHeaderSize);
	encode_image_header(payload.size(), out.data());
	out.insert(out.end(), payload.begin(), payload.end());
	return out;
}

inline KfdDevice sample_gpu(uint32_t node_id, uint32_t gpu_id, uint32_t minor)
{
	KfdDevice d;
	d.node_id = node_id;
	d.gpu_id = gpu_id;
	d.simd_count = 240;
	d.mem_banks_count = 1;
	d.caches_count = 200 + node_id;
	d.io_links_count = 1;
	d.max_waves_per_simd = 8;
	d.lds_size_in_kb = 64;
	d.num_gws = 64;
	d.wave_front_size = 64;
	d.array_count = 8;
	d.simd_arrays_per_engine = 1;
	d.cu_per_simd_array = 15;
	d.simd_per_cu = 4;
	d.max_slots_scratch_cu = 32;
	d.vendor_id = 0x1002;
	d.device_id = 0x740f;
	d.domain = 0;
	d.drm_render_minor = minor;
	d.hive_id = 0x1234567890abcdefull;
	d.num_sdma_engines = 2;
	d.num_sdma_xgmi_engines = 6;
	d.num_sdma_queues_per_engine = 8;
	d.num_cp_queues = 24;
	d.fw_version = 78;
	d.capability = 0x2a0c3280;
	d.sdma_fw_version = 9;
	d.vram_public = 1;
	d.vram_size = 64ull << 30;
	d.iolinks = {{2, 0}, {11, node_id == 1 ? 2u : 1u}};
	return d;
}

// Two GPUs (0x1111 at renderD128, 0x2222 at renderD129) and one CPU; BOs
// with and without contents on both GPUs.
inline KfdImage sample_kfd_image(size_t priv_size = 4096)
{
	KfdImage img;
	img.pid = 4242;
	KfdDevice cpu;
	cpu.node_id = 0;
	cpu.cpu_cores_count = 64;
	cpu.iolinks = {{2, 1}, {2, 2}};
	img.devices = {cpu, sample_gpu(1, 0x1111, 128), sample_gpu(2, 0x2222, 129)};
	img.bos = {
		{0x7f0000000000, 0x200000, 0x1000, kKfdAllocVram, 0x1111, 1},
		{0x7f0000200000, 0x1000, 0x2000, kKfdAllocGtt, 0x1111, 2},
		{0x7f0000300000, 0x1000, 0x3000, 1u << 3 /* doorbell */, 0x1111, 3},
		{0x7f0000400000, 0x3000, 0x4000, kKfdAllocVram, 0x2222, 4},
		{0x7f0000500000, 0x2000, 0x5000, 1u << 2 /* userptr */, 0x2222, 5},
	};
	img.num_of_objects = 7;
	img.shared_mem_size = 4096;
	img.shared_mem_magic = 0x4b464454;
	img.priv_data = testcommon::pattern_bytes(priv_size, 99);
	return img;
}

inline RenderNodeImage sample_render_image()
{
	RenderNodeImage img;
	img.gpu_id = 0x1111;
	img.id = 17;
	img.drm_render_minor = 128;
	DrmBo a;
	a.addr = 0x100000;
	a.size = 0x4000;
	a.offset = 0x10000000;
	a.alloc_flags = 0x4;
	a.preferred_domains = kGemDomainVram;
	a.handle = 5;
	a.alignment = 0x1000;
	a.vms = {{0x100000, 0x4000, 0, 0xe}, {0x200000, 0x2000, 0x2000, 0x2}};
	DrmBo b;
	b.addr = 0x200000;
	b.size = 0x1000;
	b.preferred_domains = 0x1; // CPU: no contents
	b.handle = 6;
	b.is_import = true;
	DrmBo c;
	c.addr = 0x300000;
	c.size = 0x2000;
	c.preferred_domains = kGemDomainGtt;
	c.handle = 7;
	c.vms = {{0x300000, 0x2000, 0, 0}};
	img.bos = {a, b, c};
	return img;
}

// What the restore does at the image layer: the KFD image `id` in `path`,
// its pages resolved (resolve_chain_pages: a parent chain, deduplicated
// chunks), each GPU's stream of `gpus` read through ChainSource or, with
// nothing to resolve, its own pages file (with the image's seal), checked
// against the image's checksums and read to its end. The contents by BO
// index.
inline Result<std::map<size_t, std::vector<uint8_t>>> restore_kfd_contents(const std::string &path, int id,
									     std::span<const uint32_t> gpus)
{
	auto dir = ImageDir::open(path);
	if (!dir)
		return std::move(dir).error();
	auto img = read_kfd_image(*dir, id);
	if (!img)
		return std::move(img).error();
	auto pages = resolve_chain_pages(*dir, id, *img);
	if (!pages)
		return std::move(pages).error();
	std::map<size_t, std::vector<uint8_t>> got;
	for (uint32_t gpu : gpus) {
		std::optional<PagesReader> whole;
		std::optional<ChainSource> linked;
		ByteSource *src = nullptr;
		if (auto c = pages->find(gpu); c != pages->end()) {
			src = &linked.emplace(*dir, c->second);
		} else {
			auto r = PagesReader::open_kfd(*dir, id, gpu, pages_seal(img->binding));
			if (!r)
				return std::move(r).error();
			src = &whole.emplace(std::move(*r));
		}
		std::vector<VerifyingSource::Bo> vb;
		for (size_t i = 0; i < img->bos.size(); i++)
			if (img->bos[i].gpu_id == gpu && img->bos[i].has_contents())
				vb.push_back({img->bos[i].size, &*img->bos[i].checksum, strprintf("BO %zu", i)});
		VerifyingSource checked(*src, vb);
		for (size_t i = 0; i < img->bos.size(); i++) {
			if (img->bos[i].gpu_id != gpu || !img->bos[i].has_contents())
				continue;
			auto &bytes = got[i];
			bytes.resize(img->bos[i].size);
			if (auto st = checked.read(bytes.data(), bytes.size()); !st)
				return std::move(st).error();
		}
		if (src->remaining() != 0)
			return make_error(EINVAL, "bytes left over");
	}
	return got;
}

} // namespace amdcr::test
