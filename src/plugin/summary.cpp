// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/summary.h"

#include <algorithm>
#include <iterator>

namespace amdcr {
namespace {

// "5.10 MiB": the largest binary unit that keeps the number >= 1.
std::string human_bytes(uint64_t n)
{
	static constexpr const char *kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	double v = static_cast<double>(n);
	size_t u = 0;
	while (v >= 1024 && u + 1 < std::size(kUnits)) {
		v /= 1024;
		u++;
	}
	return u == 0 ? strprintf("%llu bytes", static_cast<unsigned long long>(n)) : strprintf("%.2f %s", v, kUnits[u]);
}

} // namespace

void count_file(CopyTotals &totals, size_t bo_entries, std::optional<uint32_t> gpu_id)
{
	totals.files++;
	totals.bo_entries += bo_entries;
	if (gpu_id)
		totals.add_gpu(*gpu_id);
}

std::string summary_line(const CopyTotals &t, bool dump, const Config &config)
{
	const uint64_t files = t.files, bytes = t.bytes;
	if (files == 0)
		return {};
	const double secs = t.seconds();
	const std::string budget =
		config.max_buffer_size
			? strprintf("%s=%llu", kMaxBufferSizeEnv,
				    static_cast<unsigned long long>(config.max_buffer_size))
			: strprintf("%llu MiB per GPU", static_cast<unsigned long long>(kDefaultStagingBound >> 20));
	std::string s = strprintf(
		"%s: %llu GPU file%s, %zu GPU%s, %llu BOs (%llu with contents), %llu bytes (%s) in "
		"%.3f s, %.2f GB/s, staging peak %llu bytes of %s",
		dump ? "dump" : "restore", static_cast<unsigned long long>(files), files == 1 ? "" : "s",
		t.gpus(), t.gpus() == 1 ? "" : "s", static_cast<unsigned long long>(t.bo_entries.load()),
		static_cast<unsigned long long>(t.copied_bos.load()), static_cast<unsigned long long>(bytes),
		human_bytes(bytes).c_str(), secs,
		secs > 0 ? static_cast<double>(bytes) / secs / 1e9 : 0.0,
		static_cast<unsigned long long>(t.peak_staging.load()), budget.c_str());
	if (dump && t.incremental_gpus.load() > 0)
		s += strprintf(", incremental on %llu GPU%s: %llu bytes (%s) written, %llu bytes (%s) taken from the "
			       "parent checkpoint, chunks hashed on up to %llu thread%s per GPU (at most %u)",
			       static_cast<unsigned long long>(t.incremental_gpus.load()),
			       t.incremental_gpus.load() == 1 ? "" : "s",
			       static_cast<unsigned long long>(t.written_bytes.load()),
			       human_bytes(t.written_bytes.load()).c_str(),
			       static_cast<unsigned long long>(t.parent_bytes.load()),
			       human_bytes(t.parent_bytes.load()).c_str(),
			       static_cast<unsigned long long>(std::max<uint64_t>(1, t.hash_threads.load())),
			       t.hash_threads.load() > 1 ? "s" : "", kMaxHashThreads);
	if (dump && t.dedup_bytes.load() > 0)
		s += strprintf(", deduplicated: %llu bytes (%s) written, %llu bytes (%s) not written again (chunks "
			       "stored once for several BOs)",
			       static_cast<unsigned long long>(t.written_bytes.load()),
			       human_bytes(t.written_bytes.load()).c_str(),
			       static_cast<unsigned long long>(t.dedup_bytes.load()),
			       human_bytes(t.dedup_bytes.load()).c_str());
	if (!dump && t.read_bytes.load() < bytes)
		s += strprintf(", deduplicated: %llu bytes (%s) read from pages files, %llu bytes (%s) copied from "
			       "chunks read once for several BOs",
			       static_cast<unsigned long long>(t.read_bytes.load()),
			       human_bytes(t.read_bytes.load()).c_str(),
			       static_cast<unsigned long long>(bytes - t.read_bytes.load()),
			       human_bytes(bytes - t.read_bytes.load()).c_str());
	if (!dump)
		s += config.verify ? strprintf(", checksums matched for %llu bytes",
					       static_cast<unsigned long long>(t.verified_bytes.load()))
				   : strprintf(", checksums not checked (%s=0)", kVerifyEnv);
	return s;
}

} // namespace amdcr
