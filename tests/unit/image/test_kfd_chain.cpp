// SPDX-License-Identifier: GPL-2.0-only
// Incremental checkpoints (image/from_parent.h, image/kfd_chain.h): the
// delta sink writes only changed chunks; a chain of any depth reads back
// every byte from the checkpoint holding it; broken chains are refused
// naming the directory and file.
#include <criterion/criterion.h>

#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <map>
#include <string>
#include <vector>

#include "../common/assert_ok.h"
#include "image/binding.h"
#include "image/from_parent.h"
#include "image/image_names.h"
#include "image/kfd_chain.h"
#include "image/kfd_image.h"
#include "image/pages_file.h"
#include "image_test_util.h"

using namespace amdcr;

namespace {

constexpr uint32_t kGpus[] = {0x1111, 0x2222};

constexpr uint32_t kChunk = 4096; // small chunks: many per BO

// A directory tree under $TMPDIR, removed with everything in it.
class Tree {
public:
	Tree()
	{
		const char *base = std::getenv("TMPDIR");
		std::string tmpl = std::string(base && *base ? base : "/tmp") + "/amdcr-chain-XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back('\0');
		if (::mkdtemp(buf.data()))
			root_ = buf.data();
	}
	~Tree()
	{
		if (!root_.empty())
			::nftw(root_.c_str(),
			       [](const char *p, const struct stat *, int, FTW *) { return ::remove(p); }, 16,
			       FTW_DEPTH | FTW_PHYS);
	}
	// A checkpoint directory; with `parent`, its `parent` link -> ../parent.
	std::string ckpt(const std::string &name, const std::string &parent = "")
	{
		const std::string d = root_ + "/" + name;
		::mkdir(d.c_str(), 0700);
		if (!parent.empty())
			(void)::symlink(("../" + parent).c_str(), (d + "/parent").c_str());
		return d;
	}
	const std::string &root() const { return root_; }

private:
	std::string root_;
};

// A process's GPU memory: sample_kfd_image's BOs and the contents of those
// that have contents (BO 0: 2 MiB = 512 chunks, BO 1: 1 chunk on 0x1111;
// BO 3: 3 chunks on 0x2222).
struct Memory {
	KfdImage img = test::sample_kfd_image();
	std::map<size_t, std::vector<uint8_t>> contents;
	Memory()
	{
		for (size_t i = 0; i < img.bos.size(); i++)
			if (img.bos[i].has_contents())
				contents[i] = testcommon::pattern_bytes(img.bos[i].size, 10 + i);
	}
	void change_chunk(size_t bo, size_t k, uint8_t seed)
	{
		auto fresh = testcommon::pattern_bytes(kChunk, seed);
		std::copy(fresh.begin(), fresh.end(), contents[bo].begin() + static_cast<long>(k * kChunk));
	}
};

struct Dumped {
	uint64_t written = 0, parent = 0;
};

// What the plugin's dump does at the image layer: each GPU's BOs through
// a DeltaSink (against the parent's checksums when `dir` has a parent
// checkpoint of this pid) in 1000-byte writes, then the KFD image.
Dumped dump(const std::string &path, int id, Memory m)
{
	Dumped out;
	auto dir = ImageDir::open(path);
	cr_assert_ok(dir);
	std::string why;
	auto prev = find_parent_kfd_image(*dir, m.img.pid, &why);
	cr_assert_ok(prev);
	auto dump_id = new_dump_id();
	cr_assert_ok(dump_id);
	bool chained = false;
	for (uint32_t gpu : kGpus) {
		std::vector<size_t> idx;
		std::vector<DeltaSink::Bo> bos;
		for (const auto &[i, bytes] : m.contents)
			if (m.img.bos[i].gpu_id == gpu) {
				idx.push_back(i);
				const KfdBo *same = *prev ? same_bo((*prev)->img, m.img.bos[i]) : nullptr;
				bos.push_back({m.img.bos[i].size, same && same->checksum ? &*same->checksum : nullptr});
			}
		auto w = PagesWriter::create_open_ended(*dir, kfd_pages_image_name(id, gpu), 1ull << 30);
		cr_assert_ok(w);
		DeltaSink delta(*w, bos, kChunk);
		std::vector<uint8_t> stream;
		for (size_t i : idx)
			stream.insert(stream.end(), m.contents[i].begin(), m.contents[i].end());
		for (size_t at = 0; at < stream.size(); at += 1000)
			cr_assert_ok(delta.write(stream.data() + at, std::min<size_t>(1000, stream.size() - at)));
		auto d = delta.take();
		cr_assert_ok(d);
		for (size_t k = 0; k < idx.size(); k++) {
			m.img.bos[idx[k]].checksum = d->checksums[k];
			m.img.bos[idx[k]].from_parent = d->from_parent[k];
			chained = chained || d->from_parent[k].has_value();
		}
		cr_assert_eq(w->written(), d->written_bytes);
		cr_assert_ok(w->commit());
		out.written += d->written_bytes;
		out.parent += d->parent_bytes;
	}
	m.img.binding = DumpBinding{*dump_id, static_cast<uint32_t>(id)};
	if (chained)
		m.img.parent = ChainParent{(*prev)->img.binding->dump_id, static_cast<uint32_t>((*prev)->id)};
	cr_assert_ok(write_kfd_image(*dir, id, m.img));
	return out;
}


// The checksums of the BOs of `sizes` laid end to end in `data`, chunk by
// chunk (the reference the sink's are compared with).
std::vector<BoChecksum> reference_sums(const std::vector<uint8_t> &data, const std::vector<uint64_t> &sizes)
{
	std::vector<BoChecksum> out;
	uint64_t at = 0;
	for (uint64_t size : sizes) {
		BoChecksum c;
		c.chunk_bytes = kChunk;
		for (uint64_t o = 0; o < size; o += kChunk)
			c.chunks.push_back(checksum64(data.data() + at + o, static_cast<size_t>(std::min<uint64_t>(kChunk, size - o))));
		c.whole = whole_checksum(c.chunks);
		out.push_back(std::move(c));
		at += size;
	}
	return out;
}

// A sink in memory that takes bytes back, as an open-ended pages file
// does; `most` is the most bytes it ever held.
struct Vec final : ByteSink {
	std::vector<uint8_t> bytes;
	size_t most = 0;
	Status write(const void *buf, size_t len) override
	{
		const auto *p = static_cast<const uint8_t *>(buf);
		bytes.insert(bytes.end(), p, p + len);
		most = std::max(most, bytes.size());
		return ok_status();
	}
	Status retract(uint64_t len) override
	{
		if (len > bytes.size())
			return make_error(EINVAL, "retract past the start");
		bytes.resize(bytes.size() - len);
		return ok_status();
	}
};

} // namespace

Test(kfd_chain, delta_sink_writes_only_chunks_that_differ)
{
	const auto a = testcommon::pattern_bytes(10 * kChunk + 100, 1);
	std::vector<uint64_t> sizes{a.size()};
	const auto base = reference_sums(a, sizes);

	auto b = a;
	b[3 * kChunk + 7] ^= 1; // chunk 3
	b[10 * kChunk + 50] ^= 1; // the short last chunk 10
	Vec out;
	DeltaSink delta(out, {{b.size(), &base[0]}}, kChunk);
	for (size_t at = 0; at < b.size(); at += 777) // writes cut across chunks
		cr_assert_ok(delta.write(b.data() + at, std::min<size_t>(777, b.size() - at)));
	auto d = delta.take();
	cr_assert_ok(d);
	cr_assert_eq(d->written_bytes, kChunk + 100);
	cr_assert_eq(d->parent_bytes, 9 * kChunk);
	cr_assert_eq(out.bytes.size(), kChunk + 100);
	cr_assert(std::equal(out.bytes.begin(), out.bytes.begin() + kChunk, b.begin() + 3 * kChunk));
	cr_assert(std::equal(out.bytes.begin() + kChunk, out.bytes.end(), b.begin() + 10 * kChunk));
	cr_assert(d->from_parent[0].has_value());
	for (size_t k = 0; k <= 10; k++)
		cr_assert_eq(d->from_parent[0]->has(k), k != 3 && k != 10, "chunk %zu", k);
	cr_assert_ok(check_from_parent(*d->from_parent[0], b.size()));
	// Its checksums are the whole new contents', as a complete dump's.
	cr_assert(d->checksums[0] == reference_sums(b, sizes)[0]);
}

Test(kfd_chain, delta_sink_hashes_whole_chunks_on_several_threads)
{
	// Three BOs (the middle one not a chunk multiple) in writes of 9.5
	// chunks: whole chunks hashed on 4 threads, the rest on the way.
	const std::vector<uint64_t> sizes{40 * kChunk, 13 * kChunk + 5, 30 * kChunk};
	std::vector<uint8_t> a;
	for (size_t i = 0; i < sizes.size(); i++) {
		auto b = testcommon::pattern_bytes(sizes[i], 30 + i);
		a.insert(a.end(), b.begin(), b.end());
	}
	const auto base = reference_sums(a, sizes);
	auto b = a;
	b[5 * kChunk] ^= 1;		       // BO 0 chunk 5
	b[40 * kChunk + 13 * kChunk + 1] ^= 1; // BO 1's short last chunk
	std::vector<DeltaSink::Bo> bos;
	for (size_t i = 0; i < sizes.size(); i++)
		bos.push_back({sizes[i], &base[i]});
	Vec out;
	DeltaSink delta(out, bos, kChunk, 4);
	const size_t step = 9 * kChunk + kChunk / 2;
	for (size_t at = 0; at < b.size(); at += step)
		cr_assert_ok(delta.write(b.data() + at, std::min(step, b.size() - at)));
	auto d = delta.take();
	cr_assert_ok(d);
	cr_assert_eq(d->hash_threads, 4u);
	cr_assert_eq(d->written_bytes, kChunk + 5);
	cr_assert_eq(out.bytes.size(), kChunk + 5);
	const auto w = reference_sums(b, sizes);
	for (size_t i = 0; i < sizes.size(); i++)
		cr_assert(d->checksums[i] == w[i], "BO %zu", i);
}

Test(kfd_chain, delta_sink_without_parent_writes_everything)
{
	const auto a = testcommon::pattern_bytes(5 * kChunk, 2);
	struct Count final : ByteSink {
		uint64_t n = 0;
		Status write(const void *, size_t len) override
		{
			n += len;
			return ok_status();
		}
	} c;
	DeltaSink delta(c, {{a.size(), nullptr}}, kChunk);
	cr_assert_ok(delta.write(a.data(), a.size()));
	auto d = delta.take();
	cr_assert_ok(d);
	cr_assert_eq(c.n, a.size());
	cr_assert_eq(d->parent_bytes, 0u);
	cr_assert(!d->from_parent[0].has_value());
}

// No bytes are held back for a chunk cut across writes: each write's bytes
// reach the sink before it returns (the sink holds every byte handed in,
// less the unchanged chunks taken back), so KFD_MAX_BUFFER_SIZE alone
// bounds the staging; an unchanged chunk is taken back once complete.
Test(kfd_chain, delta_sink_forwards_each_write_and_takes_unchanged_chunks_back)
{
	const auto a = testcommon::pattern_bytes(6 * kChunk, 5);
	std::vector<uint64_t> sizes{a.size()};
	const auto base = reference_sums(a, sizes);
	auto b = a;
	b[2 * kChunk + 3] ^= 1; // chunk 2 only
	Vec out;
	DeltaSink delta(out, {{b.size(), &base[0]}}, kChunk);
	const size_t step = kChunk / 3 + 1; // every chunk cut by writes
	uint64_t given = 0, unchanged_before = 0;
	for (size_t at = 0; at < b.size(); at += step) {
		const size_t n = std::min(step, b.size() - at);
		cr_assert_ok(delta.write(b.data() + at, n));
		given += n;
		// Unchanged chunks complete so far (taken back); chunk 2 is kept.
		const uint64_t complete = given / kChunk;
		unchanged_before = complete - (complete > 2 ? 1 : 0);
		cr_assert_eq(out.bytes.size(), given - unchanged_before * kChunk, "after %" PRIu64 " bytes", given);
	}
	auto d = delta.take();
	cr_assert_ok(d);
	cr_assert_eq(d->written_bytes, kChunk);
	cr_assert_eq(out.bytes.size(), kChunk);
	cr_assert(std::equal(out.bytes.begin(), out.bytes.end(), b.begin() + 2 * kChunk));
}

// An open-ended pages file takes bytes back, held-back zeros and written
// bytes alike; zeros skipped after a cut read as zeros, not as the bytes
// cut off.
Test(kfd_chain, pages_writer_retract_cuts_the_file_back)
{
	test::TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert_ok(dir);
	auto w = PagesWriter::create_open_ended(*dir, "amdgpu-pages-1-1111.img", 1 << 20);
	cr_assert_ok(w);
	const std::vector<uint8_t> data(3 * kHoleUnit, 0xab), zeros(2 * kHoleUnit, 0);
	cr_assert_ok(w->write(data.data(), data.size()));
	cr_assert_ok(w->write(zeros.data(), kHoleUnit / 2)); // held back
	cr_assert_ok(w->retract(kHoleUnit / 2 + 2 * kHoleUnit)); // the zeros, then written bytes
	cr_assert_eq(w->written(), kHoleUnit);
	cr_assert_ok(w->write(zeros.data(), zeros.size())); // a hole over what was cut
	const std::vector<uint8_t> tail(100, 0xcd);
	cr_assert_ok(w->write(tail.data(), tail.size()));
	cr_assert_not(PagesWriter::create(*dir, "amdgpu-pages-2-1111.img", 10)->retract(1).ok(),
		      "a pages file of declared size takes nothing back");
	cr_assert_ok(w->commit());
	auto r = PagesReader::open(*dir, "amdgpu-pages-1-1111.img");
	cr_assert_ok(r);
	cr_assert_eq(r->remaining(), 3 * kHoleUnit + 100);
	std::vector<uint8_t> got(r->remaining());
	cr_assert_ok(r->read(got.data(), got.size()));
	std::vector<uint8_t> want(data.begin(), data.begin() + kHoleUnit);
	want.insert(want.end(), zeros.begin(), zeros.end());
	want.insert(want.end(), tail.begin(), tail.end());
	cr_assert(got == want);
}

Test(kfd_chain, image_round_trips_its_chain_fields_and_validates_them)
{
	KfdImage img = test::sample_kfd_image();
	img.binding = DumpBinding{{1, 2, 3}, 7};
	img.parent = ChainParent{{9, 8, 7}, 5};
	FromParent f{kChunk, {}};
	f.set(1);
	f.in_parent.resize(chunk_count(img.bos[0].size, kChunk) / 8);
	img.bos[0].from_parent = f;
	auto packed = pack_kfd_image(img);
	cr_assert_ok(packed);
	auto back = unpack_kfd_image(*packed, "k.img");
	cr_assert_ok(back);
	cr_assert(back->parent == img.parent);
	cr_assert(back->bos[0].from_parent == f);
	auto size = back->pages_size(0x1111);
	cr_assert_ok(size);
	cr_assert_eq(*size, img.bos[0].size - kChunk + img.bos[1].size, "one chunk is in the parent");

	KfdImage orphan = img;
	orphan.parent.reset();
	auto st = validate_kfd_image(orphan, "k.img");
	cr_assert(!st.ok());
	cr_assert(st.error().message().find("names no parent") != std::string::npos, "%s",
		  st.error().message().c_str());
	KfdImage short_bits = img;
	short_bits.bos[0].from_parent->in_parent.pop_back();
	cr_assert(!validate_kfd_image(short_bits, "k.img").ok());
	// Without the chain fields, the image packs as before (upstream's fields
	// and this project's 100-159 only).
	KfdImage plain = img;
	plain.parent.reset();
	plain.bos[0].from_parent.reset();
	auto p2 = pack_kfd_image(plain);
	cr_assert_ok(p2);
	cr_assert_lt(p2->size(), packed->size());
}

Test(kfd_chain, open_ended_pages_file_gets_its_size_at_commit)
{
	test::TempDir tmp;
	auto dir = ImageDir::open(tmp.path());
	cr_assert_ok(dir);
	auto w = PagesWriter::create_open_ended(*dir, "p.img", 1 << 20);
	cr_assert_ok(w);
	const auto a = testcommon::pattern_bytes(5000, 4);
	cr_assert_ok(w->write(a.data(), a.size()));
	cr_assert_ok(w->commit());
	auto r = PagesReader::open(*dir, "p.img");
	cr_assert_ok(r);
	cr_assert_eq(r->payload_size(), a.size());
}

Test(kfd_chain, three_deep_chain_restores_every_byte)
{
	Tree t;
	Memory m;
	const Dumped d1 = dump(t.ckpt("c1"), 5, m);
	cr_assert_eq(d1.parent, 0u, "no parent: a complete dump");
	m.change_chunk(0, 7, 1);
	m.change_chunk(0, 300, 2);
	const Dumped d2 = dump(t.ckpt("c2", "c1"), 6, m); // another file id, as CRIU may give
	cr_assert_eq(d2.written, 2 * kChunk);
	m.change_chunk(0, 7, 3);   // again
	m.change_chunk(3, 2, 4);   // on the other GPU
	const Dumped d3 = dump(t.ckpt("c3", "c2"), 6, m);
	cr_assert_eq(d3.written, 2 * kChunk);
	cr_assert_eq(d3.parent, d1.written - 2 * kChunk);

	auto got = test::restore_kfd_contents(t.root() + "/c3", 6, kGpus);
	cr_assert_ok(got);
	cr_assert(*got == m.contents, "the newest contents, from three checkpoints");
	auto dir = ImageDir::open(t.root() + "/c3");
	cr_assert_ok(dir);
	auto img = read_kfd_image(*dir, 6);
	cr_assert_ok(img);
	auto chain = KfdChain::resolve(*dir, 6, *img);
	cr_assert_ok(chain);
	cr_assert_eq(chain->links().size(), 3u);
	cr_assert_eq(chain->links()[2].dir, "parent/parent");
	auto pages = chain->pages(0x1111);
	cr_assert_ok(pages);
	// BO 0: chunks 0-6 from c1, 7 from c3, 8-299 c1, 300 c2, 301-511 c1;
	// BO 1 from c1 (contiguous with BO 0's last chunk there).
	cr_assert_eq(pages->segments.size(), 5u);
	cr_assert_eq(pages->segments[1].file, 0u);
	cr_assert_eq(pages->segments[3].file, 1u);
}

Test(kfd_chain, new_and_resized_bos_are_written_whole)
{
	Tree t;
	Memory m;
	dump(t.ckpt("c1"), 5, m);
	m.img.bos[0].size = 0x100000; // resized: another BO across dumps
	m.contents[0].resize(0x100000);
	m.img.bos.push_back({0x7f0000600000, 2 * kChunk, 0x6000, kKfdAllocVram, 0x2222, 6});
	m.contents[m.img.bos.size() - 1] = testcommon::pattern_bytes(2 * kChunk, 77);
	const Dumped d = dump(t.ckpt("c2", "c1"), 5, m);
	cr_assert_eq(d.written, 0x100000 + 2 * kChunk);
	cr_assert_eq(d.parent, 0x1000u + 0x3000u, "BO 1 and BO 3 unchanged");
	auto got = test::restore_kfd_contents(t.root() + "/c2", 5, kGpus);
	cr_assert_ok(got);
	cr_assert(*got == m.contents);
}

Test(kfd_chain, unchanged_process_writes_nothing_and_upstream_parent_is_not_used)
{
	Tree t;
	Memory m;
	const Dumped d1 = dump(t.ckpt("c1"), 5, m);
	const Dumped d2 = dump(t.ckpt("c2", "c1"), 5, m);
	cr_assert_eq(d2.written, 0u);
	cr_assert_eq(d2.parent, d1.written);
	auto got = test::restore_kfd_contents(t.root() + "/c2", 5, kGpus);
	cr_assert_ok(got);
	cr_assert(*got == m.contents);

	// An upstream checkpoint as parent (no binding, no checksums).
	const std::string up = t.ckpt("up");
	auto updir = ImageDir::open(up);
	cr_assert_ok(updir);
	KfdImage plain = test::sample_kfd_image();
	cr_assert_ok(write_kfd_image(*updir, 5, plain));
	auto dir = ImageDir::open(t.ckpt("c3", "up"));
	cr_assert_ok(dir);
	std::string why;
	auto found = find_parent_kfd_image(*dir, plain.pid, &why);
	cr_assert_ok(found);
	cr_assert(!found->has_value());
	cr_assert(why.find("not this plugin's") != std::string::npos, "%s", why.c_str());
}

namespace {

// A 3-deep chain c1 <- c2 <- c3 (file id 5 throughout).
void three(Tree &t, Memory &m)
{
	dump(t.ckpt("c1"), 5, m);
	m.change_chunk(0, 1, 1);
	dump(t.ckpt("c2", "c1"), 5, m);
	m.change_chunk(0, 2, 2);
	dump(t.ckpt("c3", "c2"), 5, m);
}

void expect_refused(const std::string &path, const std::vector<std::string> &words)
{
	auto got = test::restore_kfd_contents(path, 5, kGpus);
	cr_assert(!got.ok(), "a broken chain was read");
	const std::string msg = got.error().message();
	for (const auto &w : words)
		cr_expect(msg.find(w) != std::string::npos, "'%s' not in: %s", w.c_str(), msg.c_str());
}

} // namespace

Test(kfd_chain, missing_link_is_refused_naming_directory_and_file)
{
	Tree t;
	Memory m;
	three(t, m);
	cr_assert_ok(test::restore_kfd_contents(t.root() + "/c3", 5, kGpus));
	const std::string c1 = t.root() + "/c1";
	::rename(c1.c_str(), (c1 + ".gone").c_str());
	expect_refused(t.root() + "/c3", {"parent/parent", "../c1", "parent/amdgpu-kfd-5.img"});
}

Test(kfd_chain, missing_parent_image_is_refused)
{
	Tree t;
	Memory m;
	three(t, m);
	::unlink((t.root() + "/c2/amdgpu-kfd-5.img").c_str());
	expect_refused(t.root() + "/c3", {"'parent' (-> ../c2)", "amdgpu-kfd-5.img"});
}

Test(kfd_chain, replaced_parent_is_refused)
{
	Tree t;
	Memory m;
	three(t, m);
	// c2 dumped again (another dump id) after c3 was taken against it.
	dump(t.root() + "/c2", 5, m);
	expect_refused(t.root() + "/c3", {"parent was replaced", "amdgpu-kfd-5.img", "../c2"});
}

Test(kfd_chain, truncated_parent_pages_file_is_refused)
{
	Tree t;
	Memory m;
	three(t, m);
	const std::string pages = t.root() + "/c1/" + kfd_pages_image_name(5, 0x1111);
	cr_assert_eq(::truncate(pages.c_str(), 4096), 0);
	expect_refused(t.root() + "/c3", {"parent/parent", kfd_pages_image_name(5, 0x1111)});
}

Test(kfd_chain, damaged_parent_chunk_fails_its_checksum)
{
	Tree t;
	Memory m;
	three(t, m);
	// A byte of c1's BO 0 chunk 100 (still taken from c1): sizes agree,
	// the checksum of the newest image catches it.
	const std::string pages = t.root() + "/c1/" + kfd_pages_image_name(5, 0x1111);
	auto raw = test::read_raw(pages);
	raw[kImageHeaderSize + 100 * kChunk + 5] ^= 0xff;
	cr_assert(test::write_raw(pages, raw));
	expect_refused(t.root() + "/c3", {"BO 0", "parent/parent/" + kfd_pages_image_name(5, 0x1111) + " at payload offset 0x64000", "KFD_VERIFY"});
}
