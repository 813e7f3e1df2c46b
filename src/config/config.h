// SPDX-License-Identifier: GPL-2.0-only
//
// The plugin's configuration, read once per stage from the environment.
//
// Every variable is optional. A value that does not parse is reported as a
// warning naming the variable, the value and the accepted forms, and the
// default is kept: a typo must not abort a restore, but it must be visible.
//
//   KFD_FW_VER_CHECK, KFD_SDMA_FW_VER_CHECK, KFD_CACHES_COUNT_CHECK,
//   KFD_NUM_GWS_CHECK, KFD_VRAM_SIZE_CHECK, KFD_NUMA_CHECK,
//   KFD_CAPABILITY_CHECK
//       Booleans: 0/1/yes/no, case-insensitive. Default: 1 (check enabled).
//   KFD_MAX_BUFFER_SIZE
//       Bytes, decimal, optional suffix K/M/G (binary, x1024, either case).
//       0 (the default) means no explicit cap.
//   KFD_VERIFY
//       Boolean as above. Default: 1 (restore checks the images' checksums).
//   KFD_PARALLEL_RESTORE
//       Boolean as above. Default: 1 (GPU memory restored by CRIU's main
//       process while the tasks restore the rest; plugin/parallel_restore.h).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/result.h"

namespace amdcr {

// The restore-time compatibility checks a user may switch off.
enum class Check {
	FwVersion,     // fw_version src <= dst
	SdmaFwVersion, // sdma_fw_version src <= dst
	CachesCount,   // caches_count src <= dst
	NumGws,	       // num_gws src <= dst
	VramSize,      // vram_size src <= dst
	Numa,	       // GPUs keep their CPU (NUMA) node grouping
	Capability,    // capability equal
};

inline constexpr Check kAllChecks[] = {
	Check::FwVersion, Check::SdmaFwVersion, Check::CachesCount, Check::NumGws,
	Check::VramSize,  Check::Numa,		Check::Capability,
};

// The environment variable that governs a check, e.g. "KFD_FW_VER_CHECK".
const char *check_env_name(Check check);

inline constexpr const char *kMaxBufferSizeEnv = "KFD_MAX_BUFFER_SIZE";
inline constexpr const char *kVerifyEnv = "KFD_VERIFY";
inline constexpr const char *kParallelRestoreEnv = "KFD_PARALLEL_RESTORE";

// Immutable once loaded: hold it as `const Config`.
struct Config {
	bool fw_version_check = true;
	bool sdma_fw_version_check = true;
	bool caches_count_check = true;
	bool num_gws_check = true;
	bool vram_size_check = true;
	bool numa_check = true;
	bool capability_check = true;
	// KFD_MAX_BUFFER_SIZE: bytes of staging memory for a process's whole
	// dump or restore, shared by the GPUs copied in parallel; 0 (unset) =
	// the built-in bound per GPU (copy/gpu_copy.h per_gpu_staging_bound).
	uint64_t max_buffer_size = 0;
	// KFD_VERIFY: dumps compute a checksum of every chunk of BO contents,
	// restores check every checksum of the images (metadata images and
	// contents) before the process can resume. 0: for speed, a dump
	// writes no content checksums (its images then restore unverified)
	// and a restore looks at none.
	bool verify = true;
	// KFD_PARALLEL_RESTORE: BO contents are copied in by a thread of
	// CRIU's main process while the restored tasks go on with the rest of
	// their restore (the tasks hand it their buffers); each task's queues
	// resume only after its copies are done and verified. 0: each task
	// copies its own buffers while CRIU restores its file (also what
	// happens where the parallel path is unavailable: CRIU 4.0/4.1,
	// --stream).
	bool parallel_restore = true;

	bool enabled(Check check) const;
	// A copy with one check switched on or off (tests, tooling).
	Config with(Check check, bool on) const;
	// One line for the log: "KFD_FW_VER_CHECK=1 ... KFD_MAX_BUFFER_SIZE=0
	// KFD_VERIFY=1 KFD_PARALLEL_RESTORE=1".
	std::string describe() const;

	bool operator==(const Config &) const = default;
};

// Looks a variable up; std::nullopt when it is not set.
using EnvSource = std::function<std::optional<std::string>(std::string_view name)>;

struct ConfigLoad {
	Config config;
	// One human-readable line per rejected value, for the caller to log.
	std::vector<std::string> warnings;
};

ConfigLoad load_config(const EnvSource &env);
ConfigLoad load_config(const std::map<std::string, std::string, std::less<>> &vars);
// getenv()-backed.
ConfigLoad config_from_process_env();

// The value parsers, exposed for tests. Errors are EINVAL with a message
// naming the accepted forms (not the variable).
Result<bool> parse_bool_setting(std::string_view value);
Result<uint64_t> parse_size_setting(std::string_view value);

} // namespace amdcr
