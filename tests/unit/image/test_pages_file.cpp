// SPDX-License-Identifier: GPL-2.0-only
// Pages files: the sink/source of the copy engine.
#include <criterion/criterion.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>
#include <cstring>
#include <thread>

#include "image/image_names.h"
#include "image/pages_file.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

Test(pages_file, write_then_read_sequentially)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const auto a = testcommon::pattern_bytes(3 << 20, 1);
	const auto b = testcommon::pattern_bytes(4096, 2);
	{
		auto w = PagesWriter::create(*dir, kfd_pages_image_name(5, 0xbeef), a.size() + b.size());
		cr_assert(w.ok());
		ByteSink &sink = *w;
		cr_assert(sink.write(a.data(), a.size()).ok());
		cr_assert_eq(w->written(), a.size());
		cr_assert(sink.write(b.data(), b.size()).ok());
		cr_assert_eq(w->remaining(), 0u);
		cr_assert(w->commit().ok());
	}
	const std::string name = kfd_pages_image_name(5, 0xbeef);
	cr_assert_eq(test::file_mode(tmp.file(name)), 0600);
	auto raw = test::read_raw(tmp.file(name));
	cr_assert_eq(raw.size(), 8 + a.size() + b.size());

	auto r = PagesReader::open_kfd(*dir, 5, 0xbeef);
	cr_assert(r.ok());
	cr_assert_eq(r->payload_size(), a.size() + b.size());
	ByteSource &src = *r;
	std::vector<uint8_t> got(a.size());
	cr_assert(src.read(got.data(), got.size()).ok());
	cr_assert(got == a);
	cr_assert_eq(src.remaining(), b.size());
	got.assign(b.size(), 0);
	cr_assert(src.read(got.data(), got.size()).ok());
	cr_assert(got == b);
	cr_assert_eq(src.remaining(), 0u);
}

Test(pages_file, random_access_and_skip)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const auto data = testcommon::pattern_bytes(10000, 3);
	auto w = PagesWriter::create(*dir, "p.img", data.size());
	cr_assert(w.ok());
	cr_assert(w->write(data.data(), data.size()).ok());
	cr_assert(w->commit().ok());

	auto r = PagesReader::open(*dir, "p.img");
	cr_assert(r.ok());
	uint8_t buf[100];
	cr_assert(r->read_at(5000, buf, sizeof(buf)).ok());
	cr_assert_eq(std::memcmp(buf, data.data() + 5000, sizeof(buf)), 0);
	cr_assert_eq(r->position(), 0u);
	cr_assert(r->skip(9950).ok());
	cr_assert(r->read(buf, 50).ok());
	cr_assert_eq(std::memcmp(buf, data.data() + 9950, 50), 0);
}

Test(pages_file, reading_past_the_end_names_the_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto w = PagesWriter::create(*dir, "q.img", 16);
	cr_assert(w.ok());
	cr_assert(w->write("0123456789abcdef", 16).ok());
	cr_assert(w->commit().ok());
	auto r = PagesReader::open(*dir, "q.img");
	cr_assert(r.ok());
	uint8_t buf[32];
	cr_assert(r->read(buf, 10).ok());
	auto st = r->read(buf, 7);
	cr_assert_not(st.ok());
	cr_assert(st.error().message().find("q.img") != std::string::npos, "%s",
		  st.error().message().c_str());
	cr_assert_eq(r->position(), 10u, "a failed read must not move the position");
	cr_assert_not(r->skip(7).ok());
	cr_assert_not(r->read_at(UINT64_MAX - 2, buf, 4).ok());
	cr_assert(r->read(buf, 6).ok());
	cr_assert_eq(r->remaining(), 0u);
}

Test(pages_file, empty_payload)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto w = PagesWriter::create(*dir, kfd_pages_image_name(1, 0x10), 0);
	cr_assert(w.ok());
	cr_assert(w->commit().ok());
	auto raw = test::read_raw(tmp.file(kfd_pages_image_name(1, 0x10)));
	cr_assert(raw == std::vector<uint8_t>(8, 0));
	auto r = PagesReader::open_kfd(*dir, 1, 0x10);
	cr_assert(r.ok());
	cr_assert_eq(r->payload_size(), 0u);
}

Test(pages_file, writer_refuses_overrun_and_short_commit)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto w = PagesWriter::create(*dir, "r.img", 8);
	cr_assert(w.ok());
	cr_assert(w->write("12345", 5).ok());
	auto st = w->write("6789", 4);
	cr_assert_not(st.ok());
	cr_assert(st.error().message().find("r.img") != std::string::npos);
	st = w->commit();
	cr_assert_not(st.ok());
	cr_assert(st.error().message().find("r.img") != std::string::npos);
	cr_assert_not(dir->exists("r.img").value());
}

Test(pages_file, abandoned_writer_leaves_no_file)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	{
		auto w = PagesWriter::create(*dir, "s.img", 4);
		cr_assert(w.ok());
		cr_assert(w->write("ab", 2).ok());
	}
	cr_assert(tmp.names().empty());
}

Test(pages_file, reader_checks_framing)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	auto bytes = test::framed(testcommon::pattern_bytes(100, 4));
	bytes.resize(90);
	cr_assert(test::write_raw(tmp.file("t.img"), bytes));
	auto r = PagesReader::open(*dir, "t.img");
	cr_assert_not(r.ok());
	cr_assert(r.error().message().find("t.img") != std::string::npos);
	cr_assert(r.error().message().find("truncated") != std::string::npos);
	r = PagesReader::open(*dir, "missing.img");
	cr_assert_not(r.ok());
	cr_assert_eq(r.error().code(), ENOENT);
}

Test(pages_file, write_error_names_the_file_and_leaves_nothing)
{
	// A file size limit makes write() fail (EFBIG) the way a full disk
	// does (ENOSPC): Criterion runs each test in its own process, so the
	// limit stays here.
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	::signal(SIGXFSZ, SIG_IGN);
	struct rlimit lim = {64 << 10, 64 << 10};
	cr_assert_eq(::setrlimit(RLIMIT_FSIZE, &lim), 0);
	const auto data = testcommon::pattern_bytes(1 << 20, 6);
	{
		// At create (the file gets its final length up front, where
		// the filesystem reserves space) or at the write.
		auto w = PagesWriter::create(*dir, kfd_pages_image_name(2, 0xabcd), data.size());
		Status st = w.ok() ? w->write(data.data(), data.size()) : Status(w.error());
		cr_assert_not(st.ok());
		cr_assert_eq(st.error().code(), EFBIG);
		cr_assert(st.error().message().find(kfd_pages_image_name(2, 0xabcd)) != std::string::npos,
			  "%s", st.error().message().c_str());
	}
	cr_assert(tmp.names().empty());
}

Test(pages_file, one_writer_per_gpu_in_parallel)
{
	// As the dump does it: one thread and one pages file per GPU, sharing
	// the ImageDir.
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	constexpr uint32_t kGpus = 4;
	bool ok[kGpus] = {};
	std::vector<std::thread> threads;
	for (uint32_t g = 0; g < kGpus; g++)
		threads.emplace_back([&, g] {
			const auto data = testcommon::pattern_bytes(256 << 10, g);
			auto w = PagesWriter::create(*dir, kfd_pages_image_name(9, 0x1000 + g), data.size());
			if (!w)
				return;
			for (size_t off = 0; off < data.size(); off += 4096)
				if (!w->write(data.data() + off, 4096))
					return;
			ok[g] = w->commit().ok();
		});
	for (auto &t : threads)
		t.join();
	for (uint32_t g = 0; g < kGpus; g++) {
		cr_assert(ok[g], "GPU %u failed", g);
		auto r = PagesReader::open_kfd(*dir, 9, 0x1000 + g);
		cr_assert(r.ok());
		std::vector<uint8_t> got(r->payload_size());
		cr_assert(r->read(got.data(), got.size()).ok());
		cr_assert(got == testcommon::pattern_bytes(256 << 10, g));
	}
	cr_assert_eq(tmp.names().size(), kGpus);
}

namespace {

// Bytes of the file really allocated on disk.
uint64_t allocated_bytes(const std::string &path)
{
	struct stat st {};
	cr_assert_eq(::stat(path.c_str(), &st), 0);
	return static_cast<uint64_t>(st.st_blocks) * 512;
}

} // namespace

Test(pages_file, zero_runs_become_holes_and_read_back_as_zeros)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	// data | 8 MiB of zeros | one odd page of data | 4 MiB of trailing zeros
	std::vector<uint8_t> all = testcommon::pattern_bytes(1 << 20, 5);
	all.resize(all.size() + (8 << 20), 0);
	const auto mid = testcommon::pattern_bytes(4096 + 8, 6);
	all.insert(all.end(), mid.begin(), mid.end());
	all.resize(all.size() + (4 << 20), 0);
	{
		auto w = PagesWriter::create(*dir, "sparse.img", all.size());
		cr_assert(w.ok());
		// In odd pieces, as the pipeline's chunks may fall.
		for (size_t off = 0; off < all.size(); off += 300000)
			cr_assert(w->write(all.data() + off, std::min<size_t>(300000, all.size() - off)).ok());
		cr_assert(w->commit().ok());
		cr_assert_geq(w->hole_bytes(), (12u << 20) - 2 * kHoleUnit);
	}
	const std::string path = tmp.file("sparse.img");
	auto raw = test::read_raw(path);
	cr_assert_eq(raw.size(), 8 + all.size());
	cr_assert(std::equal(all.begin(), all.end(), raw.begin() + 8), "contents differ");
	// Holes where the zeros were: well under half the file is allocated
	// (tmpfs and ext4 both keep holes; the data is about 1 MiB of 13).
	cr_assert_lt(allocated_bytes(path), (3u << 20), "%llu bytes allocated",
		     static_cast<unsigned long long>(allocated_bytes(path)));
	// The reader fills the holes (here across data/hole boundaries).
	auto r = PagesReader::open(*dir, "sparse.img");
	cr_assert(r.ok());
	std::vector<uint8_t> got(all.size());
	for (size_t off = 0; off < got.size(); off += 777777)
		cr_assert(r->read(got.data() + off, std::min<size_t>(777777, got.size() - off)).ok());
	cr_assert(got == all);
}

Test(pages_file, a_unit_with_one_byte_of_data_is_written_whole)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	std::vector<uint8_t> all(kHoleUnit - 8, 0); // the header fills the rest of the first unit
	all.resize(all.size() + kHoleUnit, 0);
	all[all.size() - 1] = 1; // the last byte of the second unit
	auto w = PagesWriter::create(*dir, "z.img", all.size());
	cr_assert(w.ok());
	cr_assert(w->write(all.data(), all.size()).ok());
	cr_assert(w->commit().ok());
	cr_assert_eq(w->hole_bytes(), kHoleUnit - 8);
	auto raw = test::read_raw(tmp.file("z.img"));
	cr_assert_eq(raw.size(), 8 + all.size());
	cr_assert(std::equal(all.begin(), all.end(), raw.begin() + 8));
}

namespace {

// A sealed pages file `name` of `data` in `dir`, sealed with `id`.
void write_sealed(const ImageDir &dir, const std::string &name, const std::vector<uint8_t> &data, const DumpId &id)
{
	auto w = PagesWriter::create(dir, name, data.size(), id);
	cr_assert(w.ok());
	cr_assert(w->write(data.data(), data.size()).ok());
	cr_assert(w->commit().ok());
}

std::string open_error(const ImageDir &dir, const std::string &name, std::optional<DumpId> seal)
{
	auto r = PagesReader::open(dir, name, seal);
	cr_assert_not(r.ok(), "%s opened", name.c_str());
	return r.error().message();
}

} // namespace

Test(pages_file, a_sealed_file_reads_back_its_payload_and_identity_and_upstream_reads_the_header)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const DumpId id{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	const auto data = testcommon::pattern_bytes(200000, 4);
	const std::string name = kfd_pages_image_name(7, 0x1234);
	write_sealed(*dir, name, data, id);
	auto raw = test::read_raw(tmp.file(name));
	// Upstream's reader: the header announces the payload, the seal after it.
	cr_assert_eq(raw.size(), kImageHeaderSize + data.size() + kPagesSealSize);
	cr_assert_eq(decode_image_header(raw.data()), data.size());
	cr_assert_eq(std::memcmp(raw.data() + kImageHeaderSize, data.data(), data.size()), 0);
	for (const auto &seal : {std::optional<DumpId>(id), std::optional<DumpId>()}) {
		auto r = PagesReader::open(*dir, name, seal);
		cr_assert(r.ok(), "%s", r.ok() ? "" : r.error().message().c_str());
		cr_assert_eq(r->payload_size(), data.size());
		cr_assert(r->seal() == id);
		std::vector<uint8_t> got(data.size());
		cr_assert(r->read(got.data(), got.size()).ok());
		cr_assert(got == data);
	}
}

Test(pages_file, a_file_sealed_by_another_dump_renamed_or_unsealed_is_refused_naming_it)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const DumpId ours{1}, theirs{2};
	const auto data = testcommon::pattern_bytes(5000, 5);
	write_sealed(*dir, "amdgpu-pages-3-1111.img", data, theirs);
	auto msg = open_error(*dir, "amdgpu-pages-3-1111.img", ours);
	cr_assert(msg.find("amdgpu-pages-3-1111.img: sealed by dump 02") != std::string::npos, "%s", msg.c_str());
	cr_assert(msg.find("KFD_VERIFY=0") != std::string::npos, "%s", msg.c_str());

	// Another file's seal (renamed): refused with or without an expectation.
	cr_assert_eq(::renameat(dir->fd(), "amdgpu-pages-3-1111.img", dir->fd(), "amdgpu-pages-3-2222.img"), 0);
	for (const auto &seal : {std::optional<DumpId>(theirs), std::optional<DumpId>()}) {
		msg = open_error(*dir, "amdgpu-pages-3-2222.img", seal);
		cr_assert(msg.find("amdgpu-pages-3-2222.img: sealed under another name") != std::string::npos, "%s",
			  msg.c_str());
	}

	auto w = PagesWriter::create(*dir, "amdgpu-pages-4-1111.img", data.size());
	cr_assert(w.ok());
	cr_assert(w->write(data.data(), data.size()).ok());
	cr_assert(w->commit().ok());
	msg = open_error(*dir, "amdgpu-pages-4-1111.img", ours);
	cr_assert(msg.find("amdgpu-pages-4-1111.img: not sealed") != std::string::npos, "%s", msg.c_str());
	auto plain = PagesReader::open(*dir, "amdgpu-pages-4-1111.img");
	cr_assert(plain.ok());
	cr_assert_not(plain->seal().has_value());
}

Test(pages_file, an_open_ended_sealed_file_with_trailing_zeros_keeps_its_seal)
{
	TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	const DumpId id{9};
	std::vector<uint8_t> data(3 * kHoleUnit, 0);
	data[10] = 1; // data, then a run of zeros up to the end (a hole)
	// Not reserved (an incremental dump's file) and reserved (a
	// deduplicated one's, cut to the payload at commit): the seal follows
	// the payload the header announces, also after bytes taken back.
	for (const bool reserve : {false, true}) {
		const std::string name = reserve ? "reserved.img" : "grown.img";
		auto w = PagesWriter::create_open_ended(*dir, name, data.size() + (4 << 20), reserve, id);
		cr_assert(w.ok());
		cr_assert(w->write(data.data(), data.size()).ok());
		std::vector<uint8_t> dropped(kHoleUnit + 7, 0x5a); // a chunk stored elsewhere
		cr_assert(w->write(dropped.data(), dropped.size()).ok());
		cr_assert(w->retract(dropped.size()).ok());
		cr_assert(w->commit().ok());
		struct stat st = {};
		cr_assert_eq(::fstatat(dir->fd(), name.c_str(), &st, 0), 0);
		cr_assert_eq(static_cast<uint64_t>(st.st_size), kImageHeaderSize + data.size() + kPagesSealSize,
			     "%s: %lld bytes", name.c_str(), static_cast<long long>(st.st_size));
		auto r = PagesReader::open(*dir, name, id);
		cr_assert(r.ok(), "%s", r.ok() ? "" : r.error().message().c_str());
		cr_assert_eq(r->payload_size(), data.size());
		std::vector<uint8_t> got(data.size(), 0xff);
		cr_assert(r->read(got.data(), got.size()).ok());
		cr_assert(got == data);
	}
}
