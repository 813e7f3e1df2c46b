// SPDX-License-Identifier: GPL-2.0-only
// Deduplicated checkpoints (image/chunk_index.h): the chunk index merges
// only equal bytes (a forced checksum collision stays two chunks: their
// SHA-256 digests differ, or their bytes where the index's cache keeps
// them; the cache holds to its budget), a
// claimed chunk makes a second lookup wait and a dropped claim releases it;
// a dump of two processes on two GPUs holding the same data writes each
// distinct chunk once and restores every byte; without duplicates the
// pages files are byte for byte a plain dump's; a damaged or missing
// source is refused naming the file, the chunk and the BOs using it, and
// so is one of another dump (its seal, image/pages_file.h). At restore, a
// chunk several GPU streams of one process hold is read from its pages
// file once (image/shared_chunks.h), within its memory budget, and a
// damaged one is refused by every stream holding it.
#include <criterion/criterion.h>

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../common/assert_ok.h"
#include "base/file_io.h"
#include "image/binding.h"
#include "image/chunk_index.h"
#include "image/framing.h"
#include "image/from_parent.h"
#include "image/image_names.h"
#include "image/kfd_chain.h"
#include "image/kfd_image.h"
#include "image/pages_file.h"
#include "image/shared_chunks.h"
#include "image_test_util.h"

using namespace amdcr;

namespace {

constexpr uint32_t kChunk = 4096;
constexpr uint32_t kGpus[] = {0x1111, 0x2222};

// A checkpoint directory under $TMPDIR, removed with its files, and the
// identity of the one dump writing it.
class Dir {
public:
	Dir()
	{
		auto drawn = new_dump_id();
		cr_assert_ok(drawn);
		dump_id = *drawn;
		const char *base = std::getenv("TMPDIR");
		std::string tmpl = std::string(base && *base ? base : "/tmp") + "/amdcr-dedup-XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back('\0');
		if (::mkdtemp(buf.data()))
			path_ = buf.data();
	}
	~Dir()
	{
		if (!path_.empty())
			::nftw(path_.c_str(),
			       [](const char *p, const struct stat *, int, FTW *) { return ::remove(p); }, 16,
			       FTW_DEPTH | FTW_PHYS);
	}
	const std::string &path() const { return path_; }
	std::string file(const std::string &name) const { return path_ + "/" + name; }
	DumpId dump_id{};

private:
	std::string path_;
};

// sample_kfd_image's BOs with contents (BO 0: 512 chunks, BO 1: 1 chunk on
// 0x1111; BO 3: 3 chunks on 0x2222), each its own pattern.
struct Memory {
	KfdImage img = test::sample_kfd_image();
	std::map<size_t, std::vector<uint8_t>> contents;
	explicit Memory(uint32_t pid, uint8_t seed)
	{
		img.pid = pid;
		for (size_t i = 0; i < img.bos.size(); i++)
			if (img.bos[i].has_contents())
				contents[i] = testcommon::pattern_bytes(img.bos[i].size, static_cast<uint8_t>(seed + i));
	}
};

// The plugin's dump at the image layer: each GPU's BOs through a DeltaSink
// (deduplicated against `index` when given) in writes of `piece` bytes
// (1000: every chunk cut across writes, so none is offered to the index's
// cache) into pages files sealed with d's dump identity, then the KFD
// image. Returns the payload bytes written.
uint64_t dump(const Dir &d, int id, Memory m, ChunkIndex *index, size_t piece = 1000)
{
	auto dir = ImageDir::open(d.path());
	cr_assert_ok(dir);
	uint64_t written = 0;
	for (uint32_t gpu : kGpus) {
		std::vector<size_t> idx;
		std::vector<DeltaSink::Bo> bos;
		std::vector<uint8_t> stream;
		for (const auto &[i, bytes] : m.contents)
			if (m.img.bos[i].gpu_id == gpu) {
				idx.push_back(i);
				bos.push_back({m.img.bos[i].size, nullptr});
				stream.insert(stream.end(), bytes.begin(), bytes.end());
			}
		const std::string name = kfd_pages_image_name(id, gpu);
		auto w = index ? PagesWriter::create_open_ended(*dir, name, stream.size(), true, d.dump_id)
			       : PagesWriter::create(*dir, name, stream.size(), d.dump_id);
		cr_assert_ok(w);
		DeltaDedup dd;
		if (index) {
			auto fd = w->open_reader();
			cr_assert_ok(fd);
			dd = {index, std::make_shared<const IndexedFile>(IndexedFile{name, std::move(*fd)})};
		}
		DeltaSink delta(*w, bos, kChunk, 0, std::move(dd));
		for (size_t at = 0; at < stream.size(); at += piece)
			cr_assert_ok(delta.write(stream.data() + at, std::min<size_t>(piece, stream.size() - at)));
		auto d = delta.take();
		cr_assert_ok(d);
		for (size_t k = 0; k < idx.size(); k++) {
			m.img.bos[idx[k]].checksum = d->checksums[k];
			m.img.bos[idx[k]].dedup = d->dedup[k];
		}
		cr_assert_eq(w->written(), d->written_bytes);
		cr_assert_ok(w->commit());
		written += d->written_bytes;
	}
	m.img.binding = amdcr::DumpBinding{d.dump_id, static_cast<uint32_t>(id), true};
	cr_assert_ok(write_kfd_image(*dir, id, m.img));
	return written;
}


std::vector<uint8_t> file_bytes(const std::string &path)
{
	std::vector<uint8_t> out;
	auto fd = open_at(AT_FDCWD, path, O_RDONLY);
	cr_assert_ok(fd);
	uint8_t buf[65536];
	for (;;) {
		auto n = read_full(fd->get(), buf, sizeof(buf));
		cr_assert_ok(n);
		out.insert(out.end(), buf, buf + *n);
		if (*n < sizeof(buf))
			return out;
	}
}

// An IndexedFile holding `bytes` as the payload of a pages file.
std::shared_ptr<const IndexedFile> indexed(const Dir &d, const std::string &name, const std::vector<uint8_t> &bytes)
{
	auto dir = ImageDir::open(d.path());
	cr_assert_ok(dir);
	auto w = PagesWriter::create(*dir, name, bytes.size());
	cr_assert_ok(w);
	cr_assert_ok(w->write(bytes.data(), bytes.size()));
	cr_assert_ok(w->commit());
	auto fd = open_at(AT_FDCWD, d.file(name), O_RDONLY);
	cr_assert_ok(fd);
	return std::make_shared<const IndexedFile>(IndexedFile{name, std::move(*fd)});
}

ChunkIndex::ChunkBytes from(const std::vector<uint8_t> &v)
{
	return [&v](uint64_t at, void *dst, size_t n) {
		std::memcpy(dst, v.data() + at, n);
		return ok_status();
	};
}

// One process's restore at the image layer as the copy run does it: each
// GPU's stream of image `id` read through its ChainSource on a thread of
// its own, in 1000-byte reads, checked against the checksums, all sharing
// one SharedChunkReads of `budget` bytes (none when 0: each holder reads
// its own). The bytes read from pages files, the bytes the plan gave from
// memory, and each stream's outcome (errors by GPU).
struct SharedRestore {
	uint64_t file_bytes = 0, memory_bytes = 0, peak = 0;
	size_t shared_chunks = 0;
	std::map<uint32_t, std::string> errors;
	std::map<size_t, std::vector<uint8_t>> got;
};

SharedRestore restore_shared(const Dir &d, int id, uint64_t budget)
{
	auto dir = ImageDir::open(d.path());
	cr_assert_ok(dir);
	auto img = read_kfd_image(*dir, id);
	cr_assert_ok(img);
	auto pages = resolve_chain_pages(*dir, id, *img);
	cr_assert_ok(pages);
	std::vector<const ChainPages *> streams;
	for (const auto &[gpu, p] : *pages)
		streams.push_back(&p);
	SharedChunkReads plan(streams);
	plan.set_budget(budget);
	SharedRestore out;
	std::mutex mu;
	std::vector<std::jthread> threads;
	for (const auto &[gpu, p] : *pages)
		threads.emplace_back([&, gpu = gpu, p = &p] {
			ChainSource src(*dir, *p, budget ? &plan : nullptr);
			std::vector<VerifyingSource::Bo> vb;
			std::vector<size_t> idx;
			for (size_t i = 0; i < img->bos.size(); i++)
				if (img->bos[i].gpu_id == gpu && img->bos[i].has_contents()) {
					vb.push_back({img->bos[i].size, &*img->bos[i].checksum, strprintf("BO %zu", i)});
					idx.push_back(i);
				}
			VerifyingSource checked(src, vb);
			std::map<size_t, std::vector<uint8_t>> got;
			Status st = ok_status();
			for (size_t i : idx) {
				auto &bytes = got[i];
				bytes.resize(img->bos[i].size);
				for (size_t at = 0; st && at < bytes.size(); at += 1000)
					st = checked.read(bytes.data() + at, std::min<size_t>(1000, bytes.size() - at));
			}
			std::lock_guard lk(mu);
			out.file_bytes += src.file_bytes();
			if (!st)
				out.errors[gpu] = st.error().message();
			out.got.merge(got);
		});
	threads.clear(); // joins
	out.memory_bytes = plan.memory_bytes();
	out.peak = plan.peak_bytes();
	out.shared_chunks = plan.chunks();
	return out;
}

// Process a of pid 100 whose BO 3 (0x2222) holds the first 3 chunks of its
// BO 0 (0x1111): a replica across its two GPUs, dumped deduplicated as
// file 5 of `d`.
Memory replica_across_gpus(const Dir &d)
{
	Memory a(100, 10);
	std::copy(a.contents[0].begin(), a.contents[0].begin() + 3 * kChunk, a.contents[3].begin());
	ChunkIndex index;
	cr_assert_eq(dump(d, 5, a, &index), (512 + 1) * kChunk);
	return a;
}

} // namespace

Test(dedup, a_chunk_several_gpus_hold_is_read_once_and_copied_to_each)
{
	Dir d;
	const Memory a = replica_across_gpus(d);
	const SharedRestore once = restore_shared(d, 5, 1 << 20);
	cr_assert(once.errors.empty(), "%s", once.errors.empty() ? "" : once.errors.begin()->second.c_str());
	for (const auto &[i, bytes] : a.contents)
		cr_assert(once.got.at(i) == bytes, "BO %zu restored different bytes", i);
	cr_assert_eq(once.shared_chunks, 3u);
	// Each stored byte read once: the 513 chunks stored, not the 516 held.
	cr_assert_eq(once.file_bytes, (512 + 1) * kChunk, "read %" PRIu64, once.file_bytes);
	cr_assert_geq(once.memory_bytes, 3 * kChunk, "from memory %" PRIu64, once.memory_bytes);
	cr_assert_leq(once.peak, 3 * kChunk);
	// Without the plan each holder reads its own: the 3 chunks twice.
	const SharedRestore each = restore_shared(d, 5, 0);
	cr_assert(each.errors.empty());
	cr_assert_eq(each.file_bytes, (512 + 1 + 3) * kChunk, "read %" PRIu64, each.file_bytes);
	for (const auto &[i, bytes] : a.contents)
		cr_assert(each.got.at(i) == bytes, "BO %zu restored different bytes", i);
	// A budget of one chunk: never more held, every byte right.
	const SharedRestore tight = restore_shared(d, 5, kChunk);
	cr_assert(tight.errors.empty());
	cr_assert_leq(tight.peak, kChunk);
	cr_assert_geq(tight.file_bytes, (512 + 1) * kChunk);
	for (const auto &[i, bytes] : a.contents)
		cr_assert(tight.got.at(i) == bytes, "BO %zu restored different bytes", i);
}

Test(dedup, a_damaged_chunk_several_gpus_hold_is_refused_by_each_naming_its_users)
{
	Dir d;
	replica_across_gpus(d);
	{ // one byte of chunk 1 of BO 0, which BO 3 on the other GPU refers to
		UniqueFd fd(::open(d.file("amdgpu-pages-5-1111.img").c_str(), O_RDWR | O_CLOEXEC));
		uint8_t x = 0;
		const uint64_t at = kImageHeaderSize + 1 * kChunk + 9;
		cr_assert_eq(::pread(fd.get(), &x, 1, static_cast<off_t>(at)), 1);
		x ^= 1;
		cr_assert_eq(::pwrite(fd.get(), &x, 1, static_cast<off_t>(at)), 1);
	}
	const SharedRestore r = restore_shared(d, 5, 1 << 20);
	cr_assert_eq(r.errors.size(), 2u, "%zu streams refused it", r.errors.size());
	for (const auto &[gpu, m] : r.errors) {
		cr_assert(m.find("amdgpu-pages-5-1111.img") != std::string::npos, "%s", m.c_str());
		cr_assert(m.find(gpu == 0x1111 ? "BO 0" : "BO 3") != std::string::npos, "%s", m.c_str());
		cr_assert(m.find("a deduplicated chunk that BO 3 at 0x7f0000400000 (gpu 0x2222) chunk 1 refers to") !=
				  std::string::npos,
			  "%s", m.c_str());
	}
}

Test(dedup, a_checksum_collision_never_merges_different_bytes)
{
	Dir d;
	const auto a = testcommon::pattern_bytes(kChunk, 1);
	auto b = a;
	b[kChunk - 1] ^= 0x40; // one bit apart
	ChunkIndex index;
	const uint64_t key = 0x1234; // the same weak key for both: a forced collision
	auto f = index.find(key, kChunk, from(a));
	cr_assert_ok(f);
	cr_assert(!f->place && f->claim);
	f->claim.publish(indexed(d, "amdgpu-pages-1-1111.img", a), 0);
	auto g = index.find(key, kChunk, from(b));
	cr_assert_ok(g);
	cr_assert(!g->place, "different bytes under one checksum were taken for one another");
	cr_assert_eq(index.collisions(), 1u);
	g->claim.publish(indexed(d, "amdgpu-pages-1-2222.img", b), 0);
	auto h = index.find(key, kChunk, from(b)); // b again: the second entry
	cr_assert_ok(h);
	cr_assert(h->place);
	cr_assert_str_eq(h->place->file.c_str(), "amdgpu-pages-1-2222.img");
	auto e = index.find(key, kChunk, from(a));
	cr_assert_ok(e);
	cr_assert(e->place);
	cr_assert_str_eq(e->place->file.c_str(), "amdgpu-pages-1-1111.img");
	cr_assert_eq(index.size(), 2u);
}

Test(dedup, a_kept_chunk_is_compared_byte_for_byte_and_a_dropped_one_by_digest)
{
	Dir d;
	const auto z = testcommon::pattern_bytes(kChunk, 3), a = testcommon::pattern_bytes(kChunk, 4),
		   b = testcommon::pattern_bytes(kChunk, 5), c = testcommon::pattern_bytes(kChunk, 6);
	ChunkIndex index;
	index.set_cache_budget(2 * kChunk); // two chunks: a is dropped for c
	auto f0 = index.find(9, kChunk, from(z));
	cr_assert_ok(f0);
	f0->claim.publish(indexed(d, "amdgpu-pages-9-1111.img", z), 0, z);
	cr_assert_eq(index.cache_peak(), 0u, "kept a chunk before any duplicate was found");
	auto g0 = index.find(9, kChunk, from(z)); // a duplicate, by digest: chunks are kept from now on
	cr_assert_ok(g0);
	cr_assert(g0->place);
	cr_assert_eq(index.byte_compares(), 0u);
	uint64_t key = 1;
	for (const auto *v : {&a, &b, &c}) {
		auto f = index.find(key, kChunk, from(*v));
		cr_assert_ok(f);
		cr_assert(f->claim);
		f->claim.publish(indexed(d, "amdgpu-pages-" + std::to_string(key) + "-1111.img", *v), 0, *v);
		key++;
	}
	cr_assert_eq(index.cache_peak(), 2u * kChunk, "cache peak %" PRIu64, index.cache_peak());
	auto g = index.find(3, kChunk, from(c)); // kept: memcmp
	cr_assert_ok(g);
	cr_assert(g->place);
	cr_assert_str_eq(g->place->file.c_str(), "amdgpu-pages-3-1111.img");
	cr_assert_eq(index.byte_compares(), 1u);
	auto h = index.find(1, kChunk, from(a)); // dropped, never compared: digests, from its file
	cr_assert_ok(h);
	cr_assert(h->place);
	cr_assert_str_eq(h->place->file.c_str(), "amdgpu-pages-1-1111.img");
	cr_assert_eq(index.byte_compares(), 1u);
	cr_assert_eq(index.read_backs(), 2u, "%" PRIu64 " stored chunks read back (z and a)", index.read_backs());
	auto c2 = c;
	c2[kChunk / 2] ^= 0x01; // one bit apart under c's key: never merged
	auto e = index.find(3, kChunk, from(c2));
	cr_assert_ok(e);
	cr_assert(!e->place && e->claim);
	cr_assert_eq(index.byte_compares(), 2u);
	cr_assert_eq(index.collisions(), 1u);
	index.set_cache_budget(0); // nothing kept from now on
	cr_assert_eq(index.cache_peak(), 0u);
	e->claim.publish(indexed(d, "amdgpu-pages-4-1111.img", c2), 0, c2);
	cr_assert_eq(index.cache_peak(), 0u);
	auto f = index.find(3, kChunk, from(c2));
	cr_assert_ok(f);
	cr_assert(f->place);
	cr_assert_str_eq(f->place->file.c_str(), "amdgpu-pages-4-1111.img");
	cr_assert_eq(index.byte_compares(), 2u, "compared byte for byte with a chunk the cache should not hold");
}

// A GPU far behind the others meets a chunk the cache dropped: compared
// by the digest the first in-memory comparison took, never read back (its
// pages file here holds other bytes: a read would find no duplicate).
Test(dedup, a_chunk_compared_in_memory_is_found_by_digest_once_dropped_without_a_read)
{
	Dir d;
	const auto z = testcommon::pattern_bytes(kChunk, 7), a = testcommon::pattern_bytes(kChunk, 8),
		   b = testcommon::pattern_bytes(kChunk, 9), other = testcommon::pattern_bytes(kChunk, 10);
	ChunkIndex index;
	index.set_cache_budget(kChunk); // one chunk: a is dropped for b
	auto f0 = index.find(1, kChunk, from(z));
	cr_assert_ok(f0);
	f0->claim.publish(indexed(d, "amdgpu-pages-1-1111.img", z), 0, z);
	auto g0 = index.find(1, kChunk, from(z)); // the first duplicate: read back, chunks kept from now on
	cr_assert_ok(g0);
	cr_assert(g0->place);
	cr_assert_eq(index.read_backs(), 1u);
	auto fa = index.find(2, kChunk, from(a));
	cr_assert_ok(fa);
	fa->claim.publish(indexed(d, "amdgpu-pages-2-1111.img", other), 0, a); // kept: a; stored: other
	auto ga = index.find(2, kChunk, from(a)); // in memory, and a's digest taken
	cr_assert_ok(ga);
	cr_assert(ga->place);
	cr_assert_eq(index.byte_compares(), 1u);
	auto fb = index.find(3, kChunk, from(b));
	cr_assert_ok(fb);
	fb->claim.publish(indexed(d, "amdgpu-pages-3-1111.img", b), 0, b); // a dropped
	cr_assert_eq(index.cache_peak(), kChunk);
	auto ha = index.find(2, kChunk, from(a)); // by digest, without reading its file
	cr_assert_ok(ha);
	cr_assert(ha->place, "a chunk compared in memory before was not found once dropped");
	cr_assert_str_eq(ha->place->file.c_str(), "amdgpu-pages-2-1111.img");
	cr_assert_eq(index.byte_compares(), 1u);
	cr_assert_eq(index.read_backs(), 1u, "%" PRIu64 " stored chunks read back", index.read_backs());
	auto ho = index.find(2, kChunk, from(other)); // one key, other bytes: never merged with a
	cr_assert_ok(ho);
	cr_assert(!ho->place && ho->claim);
	cr_assert_eq(index.collisions(), 1u);
}

// GPUs that reach a chunk published while nothing was kept, at once: one
// reads its stored copy back, the others take that read's digest.
Test(dedup, lookups_of_a_chunk_not_kept_read_it_back_once)
{
	Dir d;
	const auto a = testcommon::pattern_bytes(kChunk, 11);
	ChunkIndex index;
	auto f = index.find(5, kChunk, from(a));
	cr_assert_ok(f);
	f->claim.publish(indexed(d, "amdgpu-pages-5-1111.img", a), 0); // not kept
	constexpr int kLookups = 6;
	std::vector<int> found(kLookups);
	{
		std::vector<std::jthread> gpus;
		for (int i = 0; i < kLookups; i++)
			gpus.emplace_back([&, i] {
				// A slow copy: the lookups overlap while the first
				// one compares.
				auto bytes = [&](uint64_t at, void *dst, size_t n) {
					std::this_thread::sleep_for(std::chrono::milliseconds(20));
					return from(a)(at, dst, n);
				};
				auto g = index.find(5, kChunk, bytes);
				found[i] = g && g->place ? 1 : 0;
			});
	}
	for (int i = 0; i < kLookups; i++)
		cr_assert(found[i], "lookup %d found no duplicate", i);
	cr_assert_eq(index.read_backs(), 1u, "%" PRIu64 " reads of one stored chunk", index.read_backs());
}

Test(dedup, repeats_compared_in_memory_are_written_once_and_restored)
{
	Dir d;
	Memory a(110, 10);
	auto &bo0 = a.contents[0];
	// BO 0's chunk 1 repeats its chunk 0 (found by digest: from then on
	// chunks are kept); BO 3 (the other GPU) holds BO 0's chunks 100-102,
	// kept by then (a budget of 256 chunks).
	std::copy(bo0.begin(), bo0.begin() + kChunk, bo0.begin() + kChunk);
	std::copy(bo0.begin() + 100 * kChunk, bo0.begin() + 103 * kChunk, a.contents[3].begin());
	ChunkIndex index;
	index.set_cache_budget(256 * kChunk);
	// Writes of 64 KiB: the chunks lie whole in one write, offered to the cache.
	const uint64_t w = dump(d, 110, a, &index, 64 << 10);
	cr_assert_eq(w, (512 - 1 + 1) * kChunk, "wrote %" PRIu64, w);
	cr_assert_eq(index.byte_compares(), 3u, "%" PRIu64 " chunks compared in memory", index.byte_compares());
	cr_assert_leq(index.cache_peak(), 256u * kChunk);
	auto got = test::restore_kfd_contents(d.path(), 110, kGpus);
	cr_assert_ok(got);
	for (const auto &[i, bytes] : a.contents)
		cr_assert((*got)[i] == bytes, "BO %zu restored different bytes", i);
}

Test(dedup, a_lookup_waits_for_a_claim_and_a_dropped_claim_lets_it_go)
{
	Dir d;
	const auto a = testcommon::pattern_bytes(kChunk, 2);
	ChunkIndex index;
	{
		auto f = index.find(7, kChunk, from(a));
		cr_assert_ok(f);
		cr_assert(f->claim);
	} // dropped unpublished (a failed write): withdrawn
	auto f = index.find(7, kChunk, from(a));
	cr_assert_ok(f);
	cr_assert(!f->place && f->claim);
	std::atomic<bool> found{false};
	std::thread other([&] {
		auto g = index.find(7, kChunk, from(a));
		found = g && g->place && g->place->offset == 4096;
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the other lookup waits meanwhile
	cr_assert(!found);
	auto padded = testcommon::pattern_bytes(4096, 3);
	padded.insert(padded.end(), a.begin(), a.end());
	f->claim.publish(indexed(d, "amdgpu-pages-2-1111.img", padded), 4096);
	other.join();
	cr_assert(found, "the waiting lookup did not find the published chunk");
}

Test(dedup, replicas_on_two_gpus_and_two_processes_are_written_once_and_restored)
{
	Dir d;
	Memory a(100, 10), b(101, 50);
	// Process a: BO 3 (0x2222) holds BO 0's (0x1111) first 3 chunks.
	std::copy(a.contents[0].begin(), a.contents[0].begin() + 3 * kChunk, a.contents[3].begin());
	// Process b: BO 0 is a's BO 0 (a replica in another process).
	b.contents[0] = a.contents[0];
	ChunkIndex index;
	const uint64_t wa = dump(d, 5, a, &index);
	const uint64_t wb = dump(d, 6, b, &index);
	cr_assert_eq(wa, (512 + 1) * kChunk, "a wrote %" PRIu64, wa);
	cr_assert_eq(wb, (1 + 3) * kChunk, "b wrote %" PRIu64, wb);
	auto dir = ImageDir::open(d.path());
	cr_assert_ok(dir);
	auto img = read_kfd_image(*dir, 6);
	cr_assert_ok(img);
	cr_assert(img->bos[0].dedup);
	cr_assert_eq(img->bos[0].dedup->refs.size(), 512u);
	cr_assert_str_eq(img->bos[0].dedup->refs[7].file.c_str(), "amdgpu-pages-5-1111.img");
	cr_assert_eq(img->bos[0].dedup->refs[7].offset, 7u * kChunk);
	for (const auto &[id, m] : {std::pair{5, &a}, std::pair{6, &b}}) {
		auto got = test::restore_kfd_contents(d.path(), id, kGpus);
		cr_assert_ok(got);
		for (const auto &[i, bytes] : m->contents)
			cr_assert((*got)[i] == bytes, "process %d BO %zu restored different bytes", id, i);
	}
}

Test(dedup, without_duplicates_the_files_are_a_plain_dumps)
{
	Dir plain, dedup;
	dedup.dump_id = plain.dump_id; // the same seals: the same bytes expected
	Memory a(100, 10);
	a.contents[1].assign(kChunk, 0); // chunks of zeros repeat but are never deduplicated
	a.contents[3].assign(3 * kChunk, 0);
	ChunkIndex index;
	const uint64_t wp = dump(plain, 5, a, nullptr);
	const uint64_t wd = dump(dedup, 5, a, &index);
	cr_assert_eq(wp, wd);
	for (uint32_t gpu : kGpus) {
		const std::string name = kfd_pages_image_name(5, gpu);
		cr_assert(file_bytes(plain.file(name)) == file_bytes(dedup.file(name)), "%s differs", name.c_str());
	}
	auto dir = ImageDir::open(dedup.path());
	cr_assert_ok(dir);
	auto img = read_kfd_image(*dir, 5);
	cr_assert_ok(img);
	for (const KfdBo &bo : img->bos)
		cr_assert(!bo.dedup);
}

Test(dedup, a_damaged_or_missing_source_chunk_is_refused_naming_it_and_its_users)
{
	Dir d;
	Memory a(100, 10), b(101, 50);
	b.contents[0] = a.contents[0];
	ChunkIndex index;
	dump(d, 5, a, &index);
	dump(d, 6, b, &index);
	const std::string source = d.file("amdgpu-pages-5-1111.img");
	{ // one byte of chunk 2 of a's BO 0, which b's BO 0 refers to
		UniqueFd fd(::open(source.c_str(), O_RDWR | O_CLOEXEC));
		uint8_t x = 0;
		const uint64_t at = kImageHeaderSize + 2 * kChunk + 9;
		cr_assert_eq(::pread(fd.get(), &x, 1, static_cast<off_t>(at)), 1);
		x ^= 1;
		cr_assert_eq(::pwrite(fd.get(), &x, 1, static_cast<off_t>(at)), 1);
	}
	auto got = test::restore_kfd_contents(d.path(), 6, kGpus);
	cr_assert(!got);
	cr_assert_eq(got.error().code(), EBADMSG);
	const std::string m = got.error().message();
	cr_assert(m.find("amdgpu-pages-5-1111.img") != std::string::npos, "%s", m.c_str());
	cr_assert(m.find("BO 0") != std::string::npos, "%s", m.c_str());
	cr_assert(m.find("chunk 2 of 512") != std::string::npos, "%s", m.c_str());
	cr_assert(m.find("a deduplicated chunk that BO 0 at 0x7f0000000000 (gpu 0x1111) chunk 2 refers to") !=
			  std::string::npos,
		  "%s", m.c_str());
	std::fprintf(stderr, "damaged: %s\n", m.c_str());

	cr_assert_eq(::unlink(source.c_str()), 0);
	got = test::restore_kfd_contents(d.path(), 6, kGpus);
	cr_assert(!got);
	const std::string n = got.error().message();
	cr_assert(n.find("amdgpu-pages-5-1111.img") != std::string::npos, "%s", n.c_str());
	cr_assert(n.find("BO 0 at 0x7f0000000000 (gpu 0x1111) chunks 0, 1, 2, 3, 4, 5, 6, 7 and 504 more") !=
			  std::string::npos,
		  "%s", n.c_str());
	std::fprintf(stderr, "missing: %s\n", n.c_str());
}

Test(dedup, a_referenced_pages_file_of_another_dump_is_refused_by_its_seal)
{
	Dir d, other;
	Memory a(100, 10), b(101, 50);
	b.contents[0] = a.contents[0];
	ChunkIndex index, other_index;
	dump(d, 5, a, &index);
	dump(d, 6, b, &index);
	dump(other, 5, a, &other_index); // the same bytes, another dump
	const std::string name = "amdgpu-pages-5-1111.img";
	const auto foreign = file_bytes(other.file(name));
	cr_assert_eq(foreign.size(), file_bytes(d.file(name)).size());
	{ // put in place of the file b's BO 0 refers to
		UniqueFd fd(::open(d.file(name).c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
		cr_assert(fd);
		cr_assert_ok(write_full(fd.get(), foreign.data(), foreign.size()));
	}
	auto got = test::restore_kfd_contents(d.path(), 6, kGpus);
	cr_assert(!got, "a referenced pages file of another dump was taken");
	const std::string m = got.error().message();
	cr_assert(m.find(name + ": sealed by dump") != std::string::npos, "%s", m.c_str());
	cr_assert(m.find("BO 0 at 0x7f0000000000 (gpu 0x1111) chunks 0, 1, 2") != std::string::npos, "%s", m.c_str());
	std::fprintf(stderr, "foreign: %s\n", m.c_str());
}
