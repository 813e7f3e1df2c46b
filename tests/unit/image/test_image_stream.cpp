// SPDX-License-Identifier: GPL-2.0-only
// Stream mode (criu --stream): image files through an image streamer's
// pipes. The streamer here is an in-process fake with CRIU's
// img_streamer_open semantics: capture hands out a pipe's write end and
// drains the read end on a thread; serve hands out a read end fed by a
// thread, each file once, -ENOENT for an unknown or already served file.
#include <criterion/criterion.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/file_io.h"
#include "image/framing.h"
#include "image/image_names.h"
#include "image/image_stream.h"
#include "image/pages_file.h"
#include "image_test_util.h"

using namespace amdcr;
using amdcr::test::TempDir;

namespace {

// The fake streamer's state: img_streamer_open is a plain function, so
// its state is static (one test at a time per process).
struct FakeStreamer {
	std::mutex lock;
	std::map<std::string, std::vector<uint8_t>> files; // captured, or to serve
	std::map<std::string, int> served;		     // serve: times served
	std::vector<int> flags_seen;
	std::vector<std::thread> threads;

	void join()
	{
		for (auto &t : threads)
			t.join();
		threads.clear();
	}
};

FakeStreamer fake;

int fake_open(char *filename, int flags, bool capture)
{
	std::lock_guard<std::mutex> g(fake.lock);
	fake.flags_seen.push_back(flags);
	const std::string name = filename;
	int p[2];
	if (capture) {
		if (::pipe(p) != 0)
			return -1;
		fake.files[name].clear();
		fake.threads.emplace_back([name, rd = p[0]] {
			std::vector<uint8_t> got;
			uint8_t buf[8192];
			ssize_t n;
			while ((n = ::read(rd, buf, sizeof(buf))) > 0)
				got.insert(got.end(), buf, buf + n);
			::close(rd);
			std::lock_guard<std::mutex> g2(fake.lock);
			fake.files[name] = std::move(got);
		});
		return p[1];
	}
	auto it = fake.files.find(name);
	if (it == fake.files.end() || fake.served[name]++ > 0)
		return -ENOENT;
	if (::pipe(p) != 0)
		return -1;
	fake.threads.emplace_back([data = it->second, wr = p[1]] {
		(void)write_full(wr, data.data(), data.size()); // EPIPE when closed early
		::close(wr);
	});
	return p[0];
}

int fake_capture(char *filename, int flags) { return fake_open(filename, flags, true); }
int fake_serve(char *filename, int flags) { return fake_open(filename, flags, false); }

void reset()
{
	fake.join();
	fake.files.clear();
	fake.served.clear();
	fake.flags_seen.clear();
	std::signal(SIGPIPE, SIG_IGN); // as CRIU does: a closed pipe is EPIPE
}

ImageDir streamed_dir(const TempDir &tmp, ImageStreamer::Mode mode)
{
	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	dir->set_streamer(ImageStreamer(mode == ImageStreamer::Mode::Capture ? fake_capture : fake_serve, mode));
	return std::move(*dir);
}

std::vector<uint8_t> framed(const std::vector<uint8_t> &payload, uint64_t header_size)
{
	std::vector<uint8_t> out(kImageHeaderSize);
	encode_image_header(header_size, out.data());
	out.insert(out.end(), payload.begin(), payload.end());
	return out;
}

} // namespace

Test(image_stream, dump_then_restore_through_pipes_writes_nothing_to_the_directory)
{
	reset();
	TempDir tmp;
	const auto bos = testcommon::pattern_bytes((3 << 20) + 123, 7); // far beyond a pipe's 64 KiB
	const auto meta = testcommon::pattern_bytes(5000, 9);
	const std::string pages = kfd_pages_image_name(4, 0xbeef);
	{
		ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Capture);
		cr_assert(dir.streaming());
		cr_assert_not(dir.can_punch_holes());
		auto w = PagesWriter::create(dir, pages, bos.size());
		cr_assert(w.ok(), "%s", w.ok() ? "" : w.error().message().c_str());
		for (size_t off = 0; off < bos.size(); off += 100000)
			cr_assert(w->write(bos.data() + off, std::min<size_t>(100000, bos.size() - off)).ok());
		cr_assert(w->commit().ok());
		cr_assert(write_image_payload(dir, "amdgpu-kfd-4.img", meta).ok());
	}
	fake.join();
	cr_assert(tmp.names().empty(), "stream mode wrote %zu files to the image directory", tmp.names().size());
	for (int f : fake.flags_seen)
		cr_assert_eq(f, O_WRONLY | O_CREAT | O_TRUNC, "capture must open with CRIU's O_DUMP");
	// Upstream's framing, byte for byte, in the streamed file.
	cr_assert(fake.files[pages] == framed(bos, bos.size()));
	cr_assert(fake.files["amdgpu-kfd-4.img"] == framed(meta, meta.size()));
	fake.flags_seen.clear();

	ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Serve);
	auto payload = read_image_payload(dir, "amdgpu-kfd-4.img");
	cr_assert(payload.ok(), "%s", payload.ok() ? "" : payload.error().message().c_str());
	cr_assert(*payload == meta);
	auto r = PagesReader::open(dir, pages);
	cr_assert(r.ok());
	cr_assert(r->streamed());
	cr_assert_eq(r->payload_size(), bos.size());
	std::vector<uint8_t> got(bos.size());
	cr_assert(r->read(got.data(), 1000).ok());
	cr_assert(r->skip(1000).ok()); // read and dropped
	cr_assert(r->read(got.data() + 2000, got.size() - 2000).ok());
	cr_assert(std::equal(got.begin(), got.begin() + 1000, bos.begin()));
	cr_assert(std::equal(got.begin() + 2000, got.end(), bos.begin() + 2000));
	cr_assert_eq(r->remaining(), 0u);
	fake.join();
	for (int f : fake.flags_seen)
		cr_assert_eq(f, O_RDONLY, "serve must open with CRIU's O_RSTR");
	cr_assert(tmp.names().empty());
}

Test(image_stream, a_file_is_served_once_and_a_missing_one_is_enoent)
{
	reset();
	TempDir tmp;
	fake.files["amdgpu-kfd-1.img"] = framed({1, 2, 3}, 3);
	ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Serve);
	cr_assert(read_image_payload(dir, "amdgpu-kfd-1.img").ok());
	auto again = read_image_payload(dir, "amdgpu-kfd-1.img");
	cr_assert_not(again.ok());
	cr_assert_eq(again.error().code(), ENOENT);
	auto missing = read_image_payload(dir, "renderD-1.img");
	cr_assert_not(missing.ok());
	cr_assert_eq(missing.error().code(), ENOENT);
	cr_assert(missing.error().message().find("renderD-1.img") != std::string::npos);
	fake.join();
}

Test(image_stream, truncated_and_overlong_streams_are_errors_naming_the_file)
{
	reset();
	TempDir tmp;
	const auto data = testcommon::pattern_bytes(300000, 3);
	fake.files["short.img"] = framed(data, data.size() + 10);
	auto longer = data;
	longer.push_back(0xee);
	fake.files["long.img"] = framed(longer, data.size());
	fake.files["meta.img"] = framed({1, 2, 3, 4}, 3);
	ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Serve);

	auto s = PagesReader::open(dir, "short.img");
	cr_assert(s.ok());
	std::vector<uint8_t> buf(data.size() + 10);
	auto st = s->read(buf.data(), buf.size());
	cr_assert_not(st.ok());
	cr_assert(st.error().message().find("short.img: truncated") != std::string::npos, "%s",
		  st.error().message().c_str());

	auto l = PagesReader::open(dir, "long.img");
	cr_assert(l.ok());
	cr_assert(l->read(buf.data(), data.size() - 1).ok());
	st = l->read(buf.data(), 1); // the last byte: the end is checked
	cr_assert_not(st.ok());
	cr_assert(st.error().message().find("long.img: 1 bytes of trailing garbage") != std::string::npos, "%s",
		  st.error().message().c_str());

	auto m = read_image_payload(dir, "meta.img");
	cr_assert_not(m.ok());
	cr_assert(m.error().message().find("trailing garbage") != std::string::npos);
	fake.join();
}

Test(image_stream, metadata_above_the_limit_is_refused_from_the_header)
{
	reset();
	TempDir tmp;
	fake.files["amdgpu-kfd-2.img"] = framed({}, 1ull << 40); // would be 1 TiB
	ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Serve);
	auto m = read_image_payload(dir, "amdgpu-kfd-2.img");
	cr_assert_not(m.ok());
	cr_assert_eq(m.error().code(), EFBIG);
	fake.join();
}

Test(image_stream, what_needs_a_directory_fails_with_enotsup)
{
	reset();
	TempDir tmp;
	ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Serve);
	cr_assert_eq(dir.exists("a.img").error().code(), ENOTSUP);
	cr_assert_eq(dir.file_size("a.img").error().code(), ENOTSUP);
	cr_assert_eq(dir.ids_with_prefix("amdgpu-kfd-").error().code(), ENOTSUP);
	cr_assert_eq(dir.remove("a.img").error().code(), ENOTSUP);
	cr_assert_eq(dir.create("a.img").error().code(), ENOTSUP, "serve mode cannot write");
	fake.files["p.img"] = framed({1, 2}, 2);
	auto r = PagesReader::open(dir, "p.img");
	cr_assert(r.ok());
	uint8_t b[2];
	cr_assert_eq(r->read_at(0, b, 1).error().code(), ESPIPE);
	cr_assert(r->read(b, 2).ok());
	fake.join();
}

Test(image_stream, write_zeros_writes_zeros_when_streaming_and_a_hole_otherwise)
{
	reset();
	TempDir tmp;
	{
		ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Capture);
		auto f = dir.create("z.img");
		cr_assert(f.ok());
		cr_assert(f->streamed());
		cr_assert(f->write("ab", 2).ok());
		cr_assert(f->write_zeros(200000).ok());
		cr_assert(f->write("c", 1).ok());
		cr_assert(f->commit().ok());
	}
	fake.join();
	const auto &z = fake.files["z.img"];
	cr_assert_eq(z.size(), 200003u);
	cr_assert(z[0] == 'a' && z[1] == 'b' && z[200002] == 'c');
	for (size_t i = 2; i < 200002; i++)
		cr_assert_eq(z[i], 0);

	auto dir = ImageDir::open(tmp.path());
	cr_assert(dir.ok());
	cr_assert(dir->can_punch_holes());
	auto f = dir->create("h.img");
	cr_assert(f.ok());
	cr_assert(f->can_punch_holes());
	cr_assert(f->write("x", 1).ok());
	cr_assert(f->write_zeros(1 << 20).ok()); // trailing: commit sets the length
	cr_assert_eq(f->bytes_written(), (1u << 20) + 1);
	cr_assert(f->commit().ok());
	auto raw = test::read_raw(tmp.file("h.img"));
	cr_assert_eq(raw.size(), (1u << 20) + 1);
	cr_assert_eq(raw[0], 'x');
	for (size_t i = 1; i < raw.size(); i++)
		cr_assert_eq(raw[i], 0);
	struct stat st {};
	cr_assert_eq(::stat(tmp.file("h.img").c_str(), &st), 0);
	cr_assert_lt(static_cast<uint64_t>(st.st_blocks) * 512, 1u << 20, "no hole: %lld blocks",
		     static_cast<long long>(st.st_blocks));
}

Test(image_stream, an_aborted_streamed_file_leaves_a_truncated_file_and_nothing_local)
{
	reset();
	TempDir tmp;
	{
		ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Capture);
		auto w = PagesWriter::create(dir, "amdgpu-pages-1-1.img", 100);
		cr_assert(w.ok());
		cr_assert(w->write("12345", 5).ok());
		cr_assert_not(w->commit().ok(), "commit before the declared size must fail");
	} // destroyed: the pipe closes
	fake.join();
	cr_assert_eq(fake.files["amdgpu-pages-1-1.img"].size(), 8u + 5u);
	cr_assert(tmp.names().empty());
}

Test(image_stream, a_sealed_pages_file_streams_its_seal_which_the_reader_checks)
{
	reset();
	TempDir tmp;
	const DumpId id{7, 7}, other{8};
	const auto bos = testcommon::pattern_bytes(100000, 11);
	const std::string pages = kfd_pages_image_name(4, 0xbeef);
	{
		ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Capture);
		auto w = PagesWriter::create(dir, pages, bos.size(), id);
		cr_assert(w.ok());
		cr_assert(w->write(bos.data(), bos.size()).ok());
		cr_assert(w->commit().ok());
	}
	fake.join();
	const auto captured = fake.files[pages];
	cr_assert_eq(captured.size(), kImageHeaderSize + bos.size() + kPagesSealSize);
	for (const auto &[seal, good] : {std::pair{std::optional<DumpId>(id), true},
					 std::pair{std::optional<DumpId>(), true},
					 std::pair{std::optional<DumpId>(other), false}}) {
		fake.served.clear();
		ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Serve);
		auto r = PagesReader::open(dir, pages, seal);
		cr_assert(r.ok());
		std::vector<uint8_t> got(bos.size());
		auto st = r->read(got.data(), got.size());
		cr_assert_eq(st.ok(), good, "%s", st.ok() ? "read" : st.error().message().c_str());
		if (good)
			cr_assert(r->seal() == id);
		else
			cr_assert(st.error().message().find(pages + ": sealed by dump 0707") != std::string::npos, "%s",
				  st.error().message().c_str());
		fake.join();
	}
	// A streamed file without a seal where the image requires one.
	fake.files[pages] = framed(bos, bos.size());
	fake.served.clear();
	ImageDir dir = streamed_dir(tmp, ImageStreamer::Mode::Serve);
	auto r = PagesReader::open(dir, pages, id);
	cr_assert(r.ok());
	std::vector<uint8_t> got(bos.size());
	auto st = r->read(got.data(), got.size());
	cr_assert_not(st.ok());
	cr_assert(st.error().message().find(pages + ": not sealed") != std::string::npos, "%s",
		  st.error().message().c_str());
	fake.join();
}
