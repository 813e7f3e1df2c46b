// SPDX-License-Identifier: GPL-2.0-only
//
// Introspection: the model's state as JSON, one function per query (see
// README.md, "Introspection").
#include "model/state.h"
#include "testcommon/bo_checksum.h"

#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <sstream>

namespace kfdemu::detail {

namespace {

// The BO checksum (testcommon/bo_checksum.h) of a memfd-backed BO, a hole
// (which reads as zeros) as zero words without reading it. SEEK_DATA and
// SEEK_HOLE answer in pages, so every piece but the last starts and ends on
// a word.
uint64_t checksum_backing(const Backing &m, uint64_t size)
{
	uint64_t h = testcommon::kBoChecksumBasis, pos = 0;
	const auto words_to = [&](uint64_t end) { return (end + 7) / 8 - pos / 8; };
	while (pos < size) {
		off_t data = ::lseek(m.fd(), static_cast<off_t>(pos), SEEK_DATA);
		uint64_t dstart = data < 0 ? size : std::min<uint64_t>(static_cast<uint64_t>(data), size);
		if (dstart > pos) {
			testcommon::skip_zero_words(h, words_to(dstart));
			pos = dstart;
			continue;
		}
		off_t hole = ::lseek(m.fd(), static_cast<off_t>(pos), SEEK_HOLE);
		uint64_t dend = hole < 0 ? size : std::min<uint64_t>(static_cast<uint64_t>(hole), size);
		if (dend <= pos)
			dend = size;
		testcommon::fold_words(h, m.data() + pos, dend - pos);
		pos = dend;
	}
	return h;
}

std::string hex64(uint64_t v)
{
	char b[24];
	std::snprintf(b, sizeof b, "\"0x%016" PRIx64 "\"", v);
	return b;
}

const char *type_name(BoType t)
{
	switch (t) {
	case BoType::Vram: return "vram";
	case BoType::Gtt: return "gtt";
	case BoType::Userptr: return "userptr";
	case BoType::Doorbell: return "doorbell";
	case BoType::Mmio: return "mmio";
	case BoType::Cpu: return "cpu";
	}
	return "?";
}

const char *json_bool(bool b) { return b ? "true" : "false"; }

// Where a BO's pages are: a VRAM BO in VRAM or, evicted, in GTT; the
// others where their type says.
const char *resident_name(const Bo &bo)
{
	return bo.type == BoType::Vram && !bo.in_vram ? "gtt" : type_name(bo.type);
}

} // namespace

// One introspection query: the model (its lock held), the query's words
// after its name, and the JSON being written.
struct Introspection {
	ModelImpl &m;
	std::istringstream &in;
	bool nosum; // " nosum" in the query: checksums are 0
	std::ostringstream o;

	uint64_t bo_checksum(const Bo &bo);
	// A process's queries: "<query> <pid>"; the pid read into `pid`.
	KfdProcess *process(pid_t &pid);
	std::string processes();
	std::string bos();
	std::string queues();
	std::string events();
	std::string bo_bytes();
	std::string counters();
	std::string userptr();
	std::string files();
	std::string svm();
	void render_file(const DrmFile &d);
};

uint64_t Introspection::bo_checksum(const Bo &bo)
{
	if (nosum)
		return 0;
	if (bo.mem)
		return checksum_backing(*bo.mem, bo.size);
	uint64_t h = testcommon::kBoChecksumBasis;
	std::vector<uint8_t> tmp(1 << 20);
	for (uint64_t pos = 0; pos < bo.size;) {
		size_t n = static_cast<size_t>(std::min<uint64_t>(tmp.size(), bo.size - pos));
		if (m.pm_->read(bo.userptr_tgid, bo.userptr_addr + pos, tmp.data(), n) != 0)
			return 0;
		testcommon::fold_words(h, tmp.data(), n);
		pos += n;
	}
	return h;
}

KfdProcess *Introspection::process(pid_t &pid)
{
	in >> pid;
	auto it = m.procs_.find(pid);
	return it == m.procs_.end() ? nullptr : it->second.get();
}

std::string Introspection::processes()
{
	o << "{\"processes\":[";
	bool first = true;
	for (auto &[pid, p] : m.procs_) {
		o << (first ? "" : ",") << "{\"pid\":" << pid << ",\"paused\":" << json_bool(p->queues_paused)
		  << ",\"evicted\":" << json_bool(p->evicted) << ",\"evict_count\":" << p->evict_count
		  << ",\"restored\":" << json_bool(p->restored) << ",\"mem_evicted\":" << json_bool(p->mem_evicted)
		  << ",\"mem_evictions\":" << p->mem_evictions << ",\"mem_restores\":" << p->mem_restores
		  << ",\"queues\":" << p->queues.size()
		  << ",\"events\":" << p->events.size() << ",\"xnack\":" << p->xnack << ",\"devices\":[";
		for (size_t i = 0; i < p->pdds.size(); ++i)
			o << (i ? "," : "") << "{\"user_gpu_id\":" << p->pdds[i].user_gpu_id
			  << ",\"gpu_id\":" << p->pdds[i].dev->gpu_id << ",\"bound\":" << json_bool(p->pdds[i].drm != nullptr)
			  << ",\"bos\":" << p->pdds[i].bos.size() << "}";
		o << "]}";
		first = false;
	}
	o << "]}";
	return o.str();
}

std::string Introspection::bos()
{
	pid_t pid = 0;
	KfdProcess *p = process(pid);
	if (!p)
		return "{\"error\":\"no such process\"}";
	auto kfd_offset = [&](const Pdd &pdd, const Bo &bo) -> uint64_t {
		if (bo.type == BoType::Doorbell)
			return abi::kfd::MMAP_TYPE_DOORBELL | abi::kfd::mmap_gpu_id(pdd.dev->gpu_id);
		if (bo.type == BoType::Mmio)
			return abi::kfd::MMAP_TYPE_MMIO | abi::kfd::mmap_gpu_id(pdd.dev->gpu_id);
		return bo.fake_offset;
	};
	o << "{\"pid\":" << pid << ",\"bos\":[";
	bool first = true;
	for (auto &pdd : p->pdds)
		for (auto &[id, bo] : pdd.bos) {
			uint64_t handle = (static_cast<uint64_t>(pdd.user_gpu_id) << 32) | id;
			o << (first ? "" : ",") << "{\"handle\":" << handle << ",\"id\":" << id
			  << ",\"gpu_id\":" << pdd.user_gpu_id << ",\"actual_gpu_id\":" << pdd.dev->gpu_id
			  << ",\"type\":\"" << type_name(bo->type) << "\",\"resident\":\"" << resident_name(*bo)
			  << "\",\"evictions\":" << bo->evictions << ",\"va\":" << bo->va << ",\"size\":" << bo->size
			  << ",\"flags\":" << bo->kfd_flags << ",\"mmap_offset\":" << kfd_offset(pdd, *bo)
			  << ",\"checksum\":" << hex64(bo_checksum(*bo)) << ",\"mapped_on\":[";
			auto mapped = p->mapped_on.find(bo.get());
			bool f2 = true;
			if (mapped != p->mapped_on.end())
				for (size_t idx : mapped->second) {
					o << (f2 ? "" : ",") << p->pdds[idx].user_gpu_id;
					f2 = false;
				}
			o << "]";
			if (bo->is_userptr())
				o << ",\"userptr\":" << bo->userptr_addr;
			o << "}";
			first = false;
		}
	o << "]}";
	return o.str();
}

std::string Introspection::queues()
{
	pid_t pid = 0;
	KfdProcess *p = process(pid);
	if (!p)
		return "{\"error\":\"no such process\"}";
	const char *state = p->queues_paused ? "paused" : p->evict_count > 0 ? "evicted" : "active";
	o << "{\"pid\":" << pid << ",\"state\":\"" << state << "\",\"queues\":[";
	bool first = true;
	for (auto &[id, q] : p->queues) {
		// A queue's own state: the process's while it is paused or
		// evicted, else "inactive" for a queue without a ring.
		const std::string qs = p->queues_paused || p->evict_count > 0 || q.active() ? state : "inactive";
		o << (first ? "" : ",") << "{\"id\":" << id << ",\"gpu_id\":" << q.user_gpu_id
		  << ",\"type\":" << q.args.queue_type << ",\"ring_base\":" << q.args.ring_base_address
		  << ",\"ring_size\":" << q.args.ring_size << ",\"priority\":" << q.args.queue_priority
		  << ",\"pipe_priority\":" << pipe_priority(q.args.queue_priority)
		  << ",\"percentage\":" << (q.args.queue_percentage & 0xff) << ",\"state\":\"" << qs << "\""
		  << ",\"gws\":" << json_bool(q.gws) << ",\"cu_mask\":[";
		for (size_t w = 0; w < q.cu_mask.size(); ++w)
			o << (w ? "," : "") << q.cu_mask[w];
		o << "],\"ctl_stack\":{\"size\":" << q.ctl_stack.size << ",\"offset\":" << q.ctl_stack.offset
		  << ",\"wg_state_offset\":" << q.ctl_stack.wg_state_offset << "}"
		  << ",\"ctx_save_restore\":{\"address\":" << q.args.ctx_save_restore_address
		  << ",\"size\":" << q.args.ctx_save_restore_size << "}";
		if (q.engine) {
			o << ",\"engine\":{\"rptr\":" << q.engine->rptr << ",\"packets\":" << q.engine->packets
			  << ",\"hung\":" << json_bool(q.engine->hung);
			if (q.engine->hung)
				o << ",\"why\":" << json_str(q.engine->why);
			if (q.engine->aql)
				o << ",\"in_flight\":" << json_bool(q.engine->in_flight != nullptr)
				  << ",\"instructions\":" << q.engine->instructions << ",\"cwsr\":{\"resumes\":"
				  << q.engine->cwsr_resumes << ",\"waves\":" << q.engine->cwsr_waves
				  << ",\"groups_done\":" << q.engine->cwsr_groups_done
				  << ",\"groups\":" << q.engine->cwsr_groups << "}";
			o << "}";
		}
		o << "}";
		first = false;
	}
	o << "]}";
	return o.str();
}

// "svm <pid>": the process's SVM ranges (bytes), their attributes, the
// user gpu_ids that may access them (in place), and where they are:
// "vram_gpu_id" (the actual id of the GPU whose VRAM holds the range) or 0.
std::string Introspection::svm()
{
	pid_t pid = 0;
	KfdProcess *p = process(pid);
	if (!p)
		return "{\"error\":\"no such process\"}";
	auto ids = [&](uint64_t bits) {
		std::string s = "[";
		for (size_t i = 0; i < p->pdds.size() && i < 64; ++i)
			if ((bits >> i) & 1)
				s += (s.size() > 1 ? "," : "") + std::to_string(p->pdds[i].user_gpu_id);
		return s + "]";
	};
	o << "{\"pid\":" << pid << ",\"pending_restore\":" << p->svm_restored.size() << ",\"ranges\":[";
	bool first = true;
	for (const auto &[start, r] : p->svm) {
		const Device *d = r.vram.device();
		o << (first ? "" : ",") << "{\"start\":" << r.start * kPage << ",\"size\":" << r.npages() * kPage
		  << ",\"preferred_loc\":" << r.preferred_loc << ",\"prefetch_loc\":" << r.prefetch_loc
		  << ",\"flags\":" << r.flags << ",\"granularity\":" << r.granularity << ",\"access\":" << ids(r.access)
		  << ",\"access_in_place\":" << ids(r.aip) << ",\"mapped\":" << ids(r.mapped)
		  << ",\"vram_gpu_id\":" << (d ? d->gpu_id : 0) << "}";
		first = false;
	}
	o << "]}";
	return o.str();
}

std::string Introspection::events()
{
	pid_t pid = 0;
	KfdProcess *p = process(pid);
	if (!p)
		return "{\"error\":\"no such process\"}";
	o << "{\"pid\":" << pid << ",\"events\":[";
	bool first = true;
	for (auto &[id, e] : p->events) {
		o << (first ? "" : ",") << "{\"id\":" << id << ",\"type\":" << e.type
		  << ",\"auto_reset\":" << json_bool(e.auto_reset) << ",\"signaled\":" << json_bool(e.signaled)
		  << ",\"waiters\":" << e.waiters << ",\"sets\":" << e.age << "}";
		first = false;
	}
	o << "]}";
	return o.str();
}

// bo-bytes <pid> <handle-or-va> <offset> <len>
std::string Introspection::bo_bytes()
{
	pid_t pid = 0;
	KfdProcess *p = process(pid);
	if (!p)
		return "{\"error\":\"no such process\"}";
	uint64_t off = 0, len = 0;
	std::string ks;
	in >> ks >> off >> len;
	const uint64_t key = std::strtoull(ks.c_str(), nullptr, 0);
	const Bo *found = nullptr;
	uint64_t base_off = 0;
	for (auto &pdd : p->pdds)
		for (auto &[id, bo] : pdd.bos)
			if (((static_cast<uint64_t>(pdd.user_gpu_id) << 32) | id) == key)
				found = bo.get();
	if (!found)
		for (auto &pdd : p->pdds)
			for (auto &[id, bo] : pdd.bos)
				if (!found && bo->va <= key && key < bo->va + bo->size) {
					found = bo.get();
					base_off = key - bo->va;
				}
	if (!found)
		return "{\"error\":\"no such bo\"}";
	off += base_off;
	if (len > 65536 || off > found->size || len > found->size - off)
		return "{\"error\":\"range\"}";
	std::vector<uint8_t> tmp(len);
	if (found->mem)
		std::memcpy(tmp.data(), found->mem->data() + off, len);
	else if (m.pm_->read(found->userptr_tgid, found->userptr_addr + off, tmp.data(), len) != 0)
		return "{\"error\":\"fault\"}";
	std::string hex;
	static const char *dig = "0123456789abcdef";
	for (uint8_t b : tmp) {
		hex += dig[b >> 4];
		hex += dig[b & 15];
	}
	return "{\"bytes\":\"" + hex + "\"}";
}

std::string Introspection::counters()
{
	o << "{\"ioctls\":{";
	bool first = true;
	for (auto &[n, v] : m.ioctl_counts_) {
		o << (first ? "" : ",") << json_str(n) << ":" << v;
		first = false;
	}
	const Counters &c = *m.counters_;
	o << "},\"sdma_jobs\":" << c.sdma_jobs.load() << ",\"sdma_failed\":" << c.sdma_failed.load()
	  << ",\"sdma_bytes\":" << c.sdma_bytes.load() << ",\"vm_faults\":" << c.vm_faults.load() << ",\"stalls\":" << c.stalls.load()
	  << ",\"bo_restores\":" << c.bo_restores.load() << ",\"process_evictions\":" << c.process_evictions.load()
	  << ",\"process_restores\":" << c.process_restores.load()
	  << ",\"gem_gtt_fallbacks\":" << c.gem_gtt_fallbacks.load() << ",\"vram\":[";
	for (size_t i = 0; i < m.devices_.size(); ++i) {
		const Device &d = *m.devices_[i];
		o << (i ? "," : "") << "{\"gpu_id\":" << d.gpu_id << ",\"size\":" << d.vram_size
		  << ",\"used\":" << d.vram_used->load() << ",\"kfd_used\":" << d.kfd_vram_used->load()
		  << ",\"evictions\":" << d.num_evictions << ",\"bytes_moved\":" << d.bytes_moved << "}";
	}
	o << "],\"faults\":[";
	{
		std::lock_guard fl(m.counters_->mu);
		for (size_t i = 0; i < c.faults.size(); ++i)
			o << (i ? "," : "") << c.faults[i];
	}
	o << "]}";
	return o.str();
}

// userptr <pid>: that process's; userptr gem-all: the GEM userptr BOs of all
// processes together
std::string Introspection::userptr()
{
	std::string arg;
	in >> arg;
	const bool all = arg == "gem-all";
	const pid_t pid = all ? 0 : static_cast<pid_t>(std::strtol(arg.c_str(), nullptr, 10));
	auto [cur, peak] = all ? m.ledger_->gem_all() : m.ledger_->get(pid);
	o << "{\"pid\":" << pid << ",\"current\":" << cur << ",\"peak\":" << peak << "}";
	return o.str();
}

// files [<pid>] [nosum]: render files opened by / kfd files of pid
std::string Introspection::files()
{
	std::string arg;
	in >> arg;
	pid_t only = arg.empty() || arg == "nosum" ? 0 : static_cast<pid_t>(std::strtol(arg.c_str(), nullptr, 10));
	o << "{\"files\":[";
	bool first = true;
	for (auto &[k, f] : m.files_) {
		if (only && (f.kind == FileKind::Kfd ? f.kfd_owner : f.drm->opener) != only)
			continue;
		o << (first ? "" : ",") << "{\"dev\":" << k.dev << ",\"ino\":" << k.ino;
		if (f.kind == FileKind::Kfd)
			o << ",\"kind\":\"kfd\",\"owner\":" << f.kfd_owner << "}";
		else
			render_file(*f.drm);
		first = false;
	}
	o << "]}";
	return o.str();
}

void Introspection::render_file(const DrmFile &d)
{
	o << ",\"kind\":\"render\",\"minor\":" << d.dev->minor << ",\"opener\":" << d.opener
	  << ",\"compute_vm\":" << json_bool(d.compute_vm) << ",\"handles\":[";
	bool f2 = true;
	for (auto &[h, bo] : d.handles()) {
		o << (f2 ? "" : ",") << "{\"handle\":" << h << ",\"size\":" << bo->size << ",\"offset\":" << bo->fake_offset
		  << ",\"type\":\"" << type_name(bo->type) << "\",\"resident\":\"" << resident_name(*bo)
		  << "\",\"evictions\":" << bo->evictions << ",\"checksum\":" << hex64(bo_checksum(*bo)) << "}";
		f2 = false;
	}
	o << "],\"mappings\":[";
	f2 = true;
	for (auto &[s, mp] : d.vm.all()) {
		o << (f2 ? "" : ",") << "{\"va\":" << mp.start << ",\"size\":" << mp.size << ",\"offset\":" << mp.offset
		  << ",\"flags\":" << mp.flags << ",\"handle\":" << d.handle_of(mp.bo.get())
		  << ",\"kfd\":" << json_bool(mp.bo->kfd) << "}";
		f2 = false;
	}
	o << "]}";
}

std::string ModelImpl::do_introspect(std::string_view query)
{
	static constexpr std::pair<std::string_view, std::string (Introspection::*)()> kQueries[] = {
		{"processes", &Introspection::processes}, {"bos", &Introspection::bos},
		{"queues", &Introspection::queues},	  {"events", &Introspection::events},
		{"bo-bytes", &Introspection::bo_bytes},	  {"counters", &Introspection::counters},
		{"userptr", &Introspection::userptr},	  {"files", &Introspection::files},
		{"svm", &Introspection::svm},
	};
	std::istringstream in{std::string(query)};
	std::string cmd;
	in >> cmd;
	std::lock_guard lk(mu_);
	Introspection q{*this, in, query.find(" nosum") != std::string_view::npos, {}};
	for (const auto &[name, fn] : kQueries)
		if (cmd == name)
			return (q.*fn)();
	return "{\"error\":\"unknown query\"}";
}

} // namespace kfdemu::detail
