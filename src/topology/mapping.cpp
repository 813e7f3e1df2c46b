// SPDX-License-Identifier: GPL-2.0-only
#include "topology/mapping.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace amdcr {

// ---- GpuMap ------------------------------------------------------------------

const GpuMapEntry *GpuMap::find_checkpointed(uint32_t checkpointed_gpu_id) const
{
	for (const auto &e : entries_)
		if (e.checkpointed_gpu_id == checkpointed_gpu_id)
			return &e;
	return nullptr;
}



// ---- property rules ----------------------------------------------------------

std::string PropertyMismatch::describe() const
{
	const bool le = requirement != "equal";
	std::string s = strprintf("%s: checkpointed %llu %s local %llu", property.c_str(),
				  static_cast<unsigned long long>(checkpointed), le ? ">" : "!=",
				  static_cast<unsigned long long>(local));
	if (check)
		s += strprintf(" (relax with %s=0)", check_env_name(*check));
	else
		s += " (cannot be relaxed)";
	return s;
}

namespace {

constexpr const char *kEqual = "equal";
constexpr const char *kNotSmaller = "checkpointed <= local";

// How each stored property compares (image/node_properties.h).
enum class Rule { none, equal, at_least };
constexpr std::optional<Check> check_None = std::nullopt;
constexpr std::optional<Check> check_CachesCount = Check::CachesCount;
constexpr std::optional<Check> check_NumGws = Check::NumGws;
constexpr std::optional<Check> check_FwVersion = Check::FwVersion;
constexpr std::optional<Check> check_SdmaFwVersion = Check::SdmaFwVersion;
constexpr std::optional<Check> check_Capability = Check::Capability;

constexpr struct {
	const char *name;
	uint32_t TopologyNode::*field;
	Rule rule;
	std::optional<Check> check;
} kPropertyRules[] = {
#define AMDCR_RULE(name, rule, check) {#name, &TopologyNode::name, Rule::rule, check_##check},
	AMDCR_NODE_PROPERTIES(AMDCR_RULE)
#undef AMDCR_RULE
};

} // namespace

std::vector<PropertyMismatch> compare_gpu_properties(const TopologyNode &src, const TopologyNode &dst,
						     const Config &config)
{
	std::vector<PropertyMismatch> out;
	for (const auto &p : kPropertyRules) {
		if (p.rule == Rule::none || (p.check && !config.enabled(*p.check)))
			continue;
		const uint32_t have = src.*(p.field), local = dst.*(p.field);
		if (p.rule == Rule::equal ? have != local : have > local)
			out.push_back({p.name, have, local, p.rule == Rule::equal ? kEqual : kNotSmaller, p.check});
	}
	if (src.vram_public != dst.vram_public)
		out.push_back({"vram_public", src.vram_public, dst.vram_public, kEqual, std::nullopt});
	if (config.enabled(Check::VramSize) && src.vram_size > dst.vram_size)
		out.push_back({"vram_size", src.vram_size, dst.vram_size, kNotSmaller, Check::VramSize});
	return out;
}

// ---- the search --------------------------------------------------------------

namespace {

// A link from a GPU to one of its CPU nodes.
struct CpuLink {
	uint32_t cpu = 0;
	uint32_t type = 0;
	bool bidirectional = false;
};

std::vector<CpuLink> cpu_links(const Topology &t, const TopologyNode &gpu)
{
	std::vector<CpuLink> out;
	for (uint32_t cpu : t.cpu_nodes_of_gpu(gpu.gpu_id)) {
		// The best valid link to that CPU.
		CpuLink best{cpu, 0, false};
		for (uint32_t type : {kIoLinkTypePcie, kIoLinkTypeXgmi})
			if (t.find_link(gpu.node_id, cpu, type)) {
				const bool bidir = t.bidirectional(gpu.node_id, cpu, type);
				if (type == kIoLinkTypeXgmi || bidir || best.type == 0)
					best = {cpu, type, bidir};
			}
		out.push_back(best);
	}
	return out;
}

// A destination link can stand in for a source link: XGMI replaces PCIe
// (not the reverse), a bidirectional link replaces a one-way one.
bool link_at_least(const CpuLink &src, const CpuLink &dst)
{
	if (src.type == kIoLinkTypeXgmi && dst.type != kIoLinkTypeXgmi)
		return false;
	if (src.bidirectional && !dst.bidirectional)
		return false;
	return true;
}

const char *link_name(uint32_t type)
{
	return type == kIoLinkTypeXgmi ? "XGMI" : "PCIe";
}

const char *rank_name(int rank)
{
	return rank == 2 ? "XGMI" : rank == 1 ? "PCIe" : "no link";
}

// The links that stand in for a link of `rank`.
const char *link_at_least_name(int rank)
{
	return rank == 2 ? "XGMI" : "PCIe or XGMI";
}

// [i][k] = link_rank of how gpus[i] reaches gpus[k]'s memory.
std::vector<std::vector<int>> peer_ranks(const Topology &t, const std::vector<const TopologyNode *> &gpus)
{
	std::vector<std::vector<int>> out(gpus.size(), std::vector<int>(gpus.size(), 0));
	for (size_t i = 0; i < gpus.size(); i++)
		for (size_t k = 0; k < gpus.size(); k++)
			if (i != k)
				out[i][k] = link_rank(t.peer_link(gpus[i]->gpu_id, gpus[k]->gpu_id));
	return out;
}

std::string gpu_label(const TopologyNode &n)
{
	return strprintf("gpu 0x%04x (node %u, renderD%u)", n.gpu_id, n.node_id, n.drm_render_minor);
}

std::string plural(size_t n, const char *word)
{
	return strprintf("%zu %s%s", n, word, n == 1 ? "" : "s");
}

constexpr size_t kNone = std::numeric_limits<size_t>::max();
constexpr uint64_t kStepBudget = 2'000'000;

class Mapper {
public:
	Mapper(const MappingInput &in, std::vector<const TopologyNode *> src, std::vector<const TopologyNode *> dst)
		: in_(in), src_(std::move(src)), dst_(std::move(dst)), assigned_(src_.size(), kNone),
		  owner_(dst_.size(), kNone)
	{
		for (const auto *s : src_)
			src_cpu_.push_back(cpu_links(*in_.checkpointed, *s));
		for (const auto *d : dst_)
			dst_cpu_.push_back(cpu_links(*in_.local, *d));
		src_peer_ = peer_ranks(*in_.checkpointed, src_);
		dst_peer_ = peer_ranks(*in_.local, dst_);
		unary_.resize(src_.size());
		unary_ok_.resize(src_.size());
		for (size_t i = 0; i < src_.size(); i++)
			for (size_t j = 0; j < dst_.size(); j++) {
				unary_[i].push_back(unary_reasons(i, j));
				unary_ok_[i].push_back(unary_[i].back().empty());
			}
	}

	Result<GpuMap> run()
	{
		if (!search(0)) {
			if (steps_ > kStepBudget)
				return make_error(EINVAL,
						  "GPU mapping: gave up after %llu search steps without a mapping",
						  static_cast<unsigned long long>(kStepBudget));
			return make_error(EINVAL, "%s", failure_.c_str());
		}
		std::vector<GpuMapEntry> entries;
		for (size_t i = 0; i < src_.size(); i++) {
			const TopologyNode *d = dst_[assigned_[i]];
			entries.push_back({src_[i]->gpu_id, d->gpu_id, d->drm_render_minor, d->node_id});
		}
		return GpuMap(std::move(entries));
	}

private:
	// Reasons a local GPU can never replace a checkpointed one, whatever
	// else is mapped.
	std::vector<std::string> unary_reasons(size_t si, size_t di) const
	{
		std::vector<std::string> out;
		for (const auto &m : compare_gpu_properties(*src_[si], *dst_[di], in_.config))
			out.push_back(m.describe());
		for (const auto &sl : src_cpu_[si]) {
			const bool any = std::any_of(dst_cpu_[di].begin(), dst_cpu_[di].end(),
						     [&](const CpuLink &dl) { return link_at_least(sl, dl); });
			if (!any)
				out.push_back(strprintf("no %s%s link to a CPU like the checkpointed link to CPU node %u "
							"(cannot be relaxed)",
							sl.bidirectional ? "bidirectional " : "", link_name(sl.type),
							sl.cpu));
		}
		for (const auto &d : peer_degree_shortfalls(si, di))
			out.push_back(d);
		return out;
	}

	// A necessary condition of the peer links, checked once per pair: a
	// local GPU must reach (and be reached by) at least as many usable
	// GPUs, per link type, as the checkpointed GPU did among the held
	// ones. It prunes hopeless branches (8 GPUs of one hive onto two
	// hives of 4) before the search starts.
	std::vector<std::string> peer_degree_shortfalls(size_t si, size_t di) const
	{
		std::vector<std::string> out;
		for (int rank : {2, 1})
			for (bool outgoing : {true, false}) {
				const size_t need = degree(src_peer_, si, rank, outgoing);
				const size_t have = degree(dst_peer_, di, rank, outgoing);
				if (need > have)
					out.push_back(strprintf(
						"%s %zu of the process's other GPUs by %s, the local GPU %s only %zu "
						"usable GPUs that way (cannot be relaxed)",
						outgoing ? "reached" : "was reached from", need, link_at_least_name(rank),
						outgoing ? "reaches" : "is reached from", have));
			}
		return out;
	}

	static size_t degree(const std::vector<std::vector<int>> &ranks, size_t i, int rank, bool outgoing)
	{
		size_t n = 0;
		for (size_t k = 0; k < ranks.size(); k++)
			if ((outgoing ? ranks[i][k] : ranks[k][i]) >= rank)
				n++;
		return n;
	}

	// Why putting src[si] on dst[di] loses a peer link to or from src[k],
	// already placed; empty when it does not.
	std::string lost_peer_link(size_t si, size_t di, size_t k) const
	{
		const size_t dk = assigned_[k];
		for (bool outgoing : {true, false}) {
			const int need = outgoing ? src_peer_[si][k] : src_peer_[k][si];
			const int have = outgoing ? dst_peer_[di][dk] : dst_peer_[dk][di];
			if (have < need)
				return strprintf("no %s link %s local gpu 0x%04x, which holds checkpointed gpu 0x%04x "
						 "(linked %s it by %s) (cannot be relaxed)",
						 link_at_least_name(need), outgoing ? "to" : "from",
						 dst_[dk]->gpu_id, src_[k]->gpu_id, outgoing ? "to" : "from",
						 rank_name(need));
		}
		return {};
	}

	bool keeps_peer_links(size_t si, size_t di, size_t k) const
	{
		const size_t dk = assigned_[k];
		return dst_peer_[di][dk] >= src_peer_[si][k] && dst_peer_[dk][di] >= src_peer_[k][si];
	}

	// Why dst[di] cannot take src[si] given the current partial mapping;
	// empty when it can. Checks the CPU mapping only for feasibility (the
	// choice of a new CPU node is made in place()).
	std::vector<std::string> reasons(size_t si, size_t di) const
	{
		std::vector<std::string> out = unary_[si][di];
		if (owner_[di] != kNone)
			out.push_back(strprintf("already taken by checkpointed gpu 0x%04x", src_[owner_[di]]->gpu_id));
		for (size_t k = 0; k < src_.size(); k++) {
			if (assigned_[k] == kNone || k == si || assigned_[k] == di)
				continue;
			if (std::string lost = lost_peer_link(si, di, k); !lost.empty())
				out.push_back(std::move(lost));
		}
		if (in_.config.numa_check) {
			for (const auto &sl : src_cpu_[si]) {
				auto it = cpu_map_.find(sl.cpu);
				if (it != cpu_map_.end()) {
					if (!has_link_to(di, sl, it->second))
						out.push_back(strprintf(
							"not linked to local CPU node %u, where checkpointed CPU node %u "
							"was placed with the GPUs that shared it (relax with %s=0)",
							it->second, sl.cpu, check_env_name(Check::Numa)));
				} else if (!free_cpu_for(di, sl)) {
					out.push_back(strprintf(
						"its CPU nodes already stand in for other checkpointed CPU nodes, so "
						"checkpointed CPU node %u would share one (relax with %s=0)",
						sl.cpu, check_env_name(Check::Numa)));
				}
			}
		}
		return out;
	}

	// The same decision as reasons(si, di).empty(), without the words.
	bool feasible(size_t si, size_t di) const
	{
		if (!unary_ok_[si][di] || owner_[di] != kNone)
			return false;
		for (size_t k = 0; k < src_.size(); k++) {
			if (assigned_[k] == kNone || k == si)
				continue;
			if (!keeps_peer_links(si, di, k))
				return false;
		}
		if (in_.config.numa_check) {
			for (const auto &sl : src_cpu_[si]) {
				auto it = cpu_map_.find(sl.cpu);
				if (it != cpu_map_.end() ? !has_link_to(di, sl, it->second) : !free_cpu_for(di, sl))
					return false;
			}
		}
		return true;
	}

	bool has_link_to(size_t di, const CpuLink &sl, uint32_t cpu) const
	{
		for (const auto &dl : dst_cpu_[di])
			if (dl.cpu == cpu && link_at_least(sl, dl))
				return true;
		return false;
	}

	bool free_cpu_for(size_t di, const CpuLink &sl) const
	{
		for (const auto &dl : dst_cpu_[di])
			if (!cpu_used_.contains(dl.cpu) && link_at_least(sl, dl))
				return true;
		return false;
	}

	// Candidates for src[si] in the preferred order: the same gpu_id, then
	// the same render minor, then node order.
	std::vector<size_t> ordered_candidates(size_t si) const
	{
		std::vector<size_t> c;
		for (size_t j = 0; j < dst_.size(); j++)
			if (feasible(si, j))
				c.push_back(j);
		auto rank = [&](size_t j) {
			if (dst_[j]->gpu_id == src_[si]->gpu_id)
				return 0;
			if (dst_[j]->drm_render_minor == src_[si]->drm_render_minor)
				return 1;
			return 2;
		};
		std::stable_sort(c.begin(), c.end(), [&](size_t a, size_t b) { return rank(a) < rank(b); });
		return c;
	}

	// Most constrained unplaced GPU first; among equals, one linked to a
	// GPU already placed, then input order.
	size_t pick_next(std::vector<size_t> &cands) const
	{
		size_t best = kNone;
		bool best_peer = false;
		for (size_t i = 0; i < src_.size(); i++) {
			if (assigned_[i] != kNone)
				continue;
			std::vector<size_t> c = ordered_candidates(i);
			bool peer = false;
			for (size_t k = 0; k < src_.size(); k++)
				if (assigned_[k] != kNone && (src_peer_[i][k] > 0 || src_peer_[k][i] > 0))
					peer = true;
			if (best == kNone || c.size() < cands.size() || (c.size() == cands.size() && peer && !best_peer)) {
				best = i;
				best_peer = peer;
				cands = std::move(c);
			}
			if (cands.empty())
				break;
		}
		return best;
	}

	bool search(size_t depth)
	{
		if (++steps_ > kStepBudget)
			return false;
		std::vector<size_t> cands;
		const size_t si = pick_next(cands);
		if (si == kNone)
			return true; // every GPU placed
		if (cands.empty()) {
			record_failure(depth, si);
			return false;
		}
		for (size_t di : cands) {
			assigned_[si] = di;
			owner_[di] = si;
			const bool ok = place_cpus(si, di, 0, depth);
			assigned_[si] = kNone;
			owner_[di] = kNone;
			if (ok) {
				assigned_[si] = di;
				owner_[di] = si;
				return true;
			}
			if (steps_ > kStepBudget)
				return false;
		}
		return false;
	}

	// Extends the CPU mapping for src[si]'s k-th CPU link (all choices),
	// then continues the search.
	bool place_cpus(size_t si, size_t di, size_t k, size_t depth)
	{
		if (!in_.config.numa_check || k == src_cpu_[si].size())
			return search(depth + 1);
		const CpuLink &sl = src_cpu_[si][k];
		auto it = cpu_map_.find(sl.cpu);
		if (it != cpu_map_.end())
			return has_link_to(di, sl, it->second) && place_cpus(si, di, k + 1, depth);
		for (const auto &dl : dst_cpu_[di]) {
			if (cpu_used_.contains(dl.cpu) || !link_at_least(sl, dl))
				continue;
			cpu_map_[sl.cpu] = dl.cpu;
			cpu_used_.insert(dl.cpu);
			const bool ok = place_cpus(si, di, k + 1, depth);
			if (ok)
				return true;
			cpu_map_.erase(sl.cpu);
			cpu_used_.erase(dl.cpu);
			if (steps_ > kStepBudget)
				return false;
		}
		return false;
	}

	// Keeps the dead end reached deepest in the search: that is the GPU
	// that could not be placed however the others were. One line per
	// distinct reason, listing the local GPUs it refuses (on a node of
	// eight equal GPUs, one line instead of eight).
	void record_failure(size_t depth, size_t si)
	{
		if (!failure_.empty() && depth <= failure_depth_)
			return;
		failure_depth_ = depth;
		std::string msg = strprintf("cannot map checkpointed %s to a local GPU", gpu_label(*src_[si]).c_str());
		std::string placed;
		for (size_t k = 0; k < src_.size(); k++)
			if (assigned_[k] != kNone)
				placed += strprintf("%s0x%04x on 0x%04x", placed.empty() ? "" : ", ", src_[k]->gpu_id,
						    dst_[assigned_[k]]->gpu_id);
		if (!placed.empty())
			msg += " (with gpu " + placed + " already placed)";
		if (dst_.empty()) {
			failure_ = msg + ": no usable local GPU";
			return;
		}
		// reason -> the local GPUs it refuses, in order of first mention.
		std::vector<std::pair<std::string, std::string>> groups;
		for (size_t j = 0; j < dst_.size(); j++)
			for (auto &r : reasons(si, j)) {
				auto g = std::find_if(groups.begin(), groups.end(),
						      [&](const auto &e) { return e.first == r; });
				if (g == groups.end())
					g = groups.insert(groups.end(), {std::move(r), ""});
				g->second += strprintf("%s0x%04x", g->second.empty() ? "" : ", ", dst_[j]->gpu_id);
			}
		msg += strprintf("; the %s refused it:", plural(dst_.size(), "usable local GPU").c_str());
		for (const auto &[reason, gpus] : groups)
			msg += strprintf("\n  %s on gpu %s", reason.c_str(), gpus.c_str());
		failure_ = std::move(msg);
	}

	const MappingInput &in_;
	std::vector<const TopologyNode *> src_;
	std::vector<const TopologyNode *> dst_;
	std::vector<std::vector<CpuLink>> src_cpu_;
	std::vector<std::vector<CpuLink>> dst_cpu_;
	// [from][to] -> link_rank() of the peer link, among src_ / dst_.
	std::vector<std::vector<int>> src_peer_;
	std::vector<std::vector<int>> dst_peer_;
	std::vector<std::vector<std::vector<std::string>>> unary_; // [src][dst] -> reasons
	std::vector<std::vector<bool>> unary_ok_;
	std::vector<size_t> assigned_; // src index -> dst index
	std::vector<size_t> owner_;    // dst index -> src index
	std::map<uint32_t, uint32_t> cpu_map_; // checkpointed CPU node -> local CPU node
	std::set<uint32_t> cpu_used_;	       // local CPU nodes in cpu_map_
	uint64_t steps_ = 0;
	std::string failure_;
	size_t failure_depth_ = 0;
};

} // namespace

Result<GpuMap> map_gpus(const MappingInput &in)
{
	if (!in.checkpointed || !in.local)
		return make_error(EINVAL, "GPU mapping: missing topology");

	std::vector<const TopologyNode *> src;
	if (in.held_gpu_ids.empty()) {
		src = in.checkpointed->accessible_gpus();
	} else {
		std::set<uint32_t> seen;
		for (uint32_t id : in.held_gpu_ids) {
			const TopologyNode *n = in.checkpointed->gpu(id);
			if (!n || !n->accessible)
				return make_error(EINVAL, "checkpointed gpu 0x%04x is not in the checkpointed topology",
						  id);
			if (!seen.insert(id).second)
				return make_error(EINVAL, "checkpointed gpu 0x%04x is listed twice", id);
			src.push_back(n);
		}
	}

	std::vector<const TopologyNode *> dst;
	for (const auto *n : in.local->accessible_gpus())
		if (!in.usable || in.usable(*n))
			dst.push_back(n);

	if (src.size() > dst.size()) {
		std::string have;
		for (const auto *d : dst)
			have += strprintf("%sgpu 0x%04x", have.empty() ? ": " : ", ", d->gpu_id);
		return make_error(EINVAL, "the checkpointed process used %s, this machine has %zu usable%s",
				  plural(src.size(), "GPU").c_str(), dst.size(), have.c_str());
	}

	Mapper m(in, std::move(src), std::move(dst));
	return m.run();
}

} // namespace amdcr
