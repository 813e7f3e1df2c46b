// SPDX-License-Identifier: GPL-2.0-only
//
// The one line a dump or a restore prints at CRIU's default log level
// (LogLevel::Notice), from the totals of all its copies (CopyTotals).
//
// A restore's files are restored by the tasks CRIU forks after the
// plugin's init, and its last hook (exit) runs in CRIU's main process: so
// the totals live in one anonymous MAP_SHARED page that the tasks inherit
// and add to, and that CRIU's process reads at exit. The same page holds the
// gate that makes the copies of all those processes take turns
// (copy/staging_gate.h). The restored process
// does not keep it: CRIU's restorer unmaps every mapping that is not in the
// checkpoint. A dump runs in CRIU's process alone and uses the same page.
#pragma once

#include <optional>
#include <string>

#include "base/result.h"
#include "config/config.h"
#include "copy/gpu_copy.h"

namespace amdcr {

class StageTotals {
public:
	static Result<StageTotals> create();
	StageTotals(StageTotals &&other) noexcept;
	StageTotals &operator=(StageTotals &&other) noexcept;
	StageTotals(const StageTotals &) = delete;
	StageTotals &operator=(const StageTotals &) = delete;
	~StageTotals();

	CopyTotals &copies() const { return shared_->copies; }
	StagingGate &gate() const { return shared_->gate; }
	// One GPU file (KFD or render node) whose image holds `bo_entries`
	// BOs; `gpu_id`: its GPU, when no copy job names it (a render node
	// without BOs to copy).
	void add_file(size_t bo_entries, std::optional<uint32_t> gpu_id = std::nullopt) const;
	// Something was added.
	bool any() const { return shared_ && shared_->copies.files > 0; }

	// "dump: 1 GPU file, 2 GPUs, 7 BOs (5 with contents), 9437184 bytes
	// (9.00 MiB) in 0.021 s, 0.45 GB/s, staging peak 4194304 bytes of 64
	// MiB per GPU"; a restore adds the bytes whose checksums matched.
	std::string line(bool dump, const Config &config) const;

private:
	struct Shared {
		CopyTotals copies;
		StagingGate gate;
	};
	explicit StageTotals(Shared *shared) : shared_(shared) {}
	Shared *shared_ = nullptr; // in its own shared page; nullptr once moved from
};

} // namespace amdcr
