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
//       Bytes, decimal, optional suffix K/M/G (binary, x1024, either case),
//       of staging memory for a whole dump or restore. 0 or unset: the
//       built-in bound of kDefaultStagingBound per GPU.
//   KFD_VERIFY
//       Boolean as above. Default: 1 (restore checks the images' checksums).
//   KFD_SDMA_TIMEOUT
//       Seconds (decimal, 1 to kMaxSdmaTimeoutSeconds) one SDMA copy may
//       take before the dump or restore fails with ETIMEDOUT. Default:
//       kDefaultSdmaTimeoutSeconds.
//   KFD_PARALLEL_RESTORE
//       Boolean as above. Default: 1 (GPU memory restored by CRIU's main
//       process while the tasks restore the rest; plugin/parallel_restore.h).
//   KFD_REQUIRE_MANIFEST
//       Boolean as above. Default: 1 (a restore refuses GPU images of this
//       plugin without their dump's manifest, amdgpu-binding.img; 0: they
//       are restored with a warning, bound to each other only).
//   KFD_DEDUP
//       Boolean as above. Default: 1 (a dump writes each distinct chunk of
//       KFD BO contents once per checkpoint; image/chunk_index.h).
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
inline constexpr const char *kSdmaTimeoutEnv = "KFD_SDMA_TIMEOUT";

// Staging bound per GPU when KFD_MAX_BUFFER_SIZE is unset (or 0): 64 MiB.
// Why: two 32 MiB halves carry 8 maximal SDMA packets (4 MiB) each, so a
// submission's fixed cost (ioctl, fence, scheduling; tens of microseconds)
// is well under 1% of its copy time, and 32 MiB file writes/reads are long
// enough for full storage throughput. It does not grow with VRAM: upstream
// sizes the buffer to the largest BO, which fails when a BO (or VRAM) is
// larger than free RAM; 64 MiB of pinned memory per GPU is 512 MiB on an
// 8-GPU node, when all GPUs are copied in parallel.
inline constexpr uint64_t kDefaultStagingBound = 64ull << 20;

// KFD_SDMA_TIMEOUT: how long one SDMA submission (at most one staging half,
// 32 MiB by default) may take. 60 s is three orders of magnitude above a
// healthy engine's time for it; a hung engine fails the dump or restore
// after that long instead of never.
inline constexpr uint64_t kDefaultSdmaTimeoutSeconds = 60;
inline constexpr uint64_t kMaxSdmaTimeoutSeconds = 24 * 3600;
inline constexpr const char *kParallelRestoreEnv = "KFD_PARALLEL_RESTORE";
inline constexpr const char *kRequireManifestEnv = "KFD_REQUIRE_MANIFEST";
inline constexpr const char *kDedupEnv = "KFD_DEDUP";

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
	// KFD_SDMA_TIMEOUT, seconds.
	uint64_t sdma_timeout_s = kDefaultSdmaTimeoutSeconds;
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
	// KFD_REQUIRE_MANIFEST: GPU images of this plugin must have their
	// dump's manifest (image/binding.h) beside them. 0: a checkpoint copied
	// by a post-dump action script, which CRIU runs before the plugin's
	// exit hook writes the manifest, restores with a warning; a manifest
	// that is there is checked all the same.
	bool require_manifest = true;
	// KFD_DEDUP: a dump (checksums on, not streamed) writes a chunk of KFD
	// BO contents that is byte for byte one it already wrote in this
	// checkpoint (any GPU, any process) as a reference to that one
	// (image/chunk_index.h). 0: every chunk is written where it belongs.
	bool dedup = true;

	bool enabled(Check check) const;
	// A copy with one check switched on or off (tests, tooling).
	Config with(Check check, bool on) const;
	// Every setting at its default (nothing the user changed).
	bool is_default() const { return *this == Config{}; }
	// The effective configuration, for the log at init: "configuration:
	// KFD_CAPABILITY_CHECK=0 (the other checks on), KFD_MAX_BUFFER_SIZE
	// unset (staging: 64 MiB per GPU), KFD_VERIFY=1, KFD_SDMA_TIMEOUT=60 s,
	// KFD_PARALLEL_RESTORE=1, KFD_REQUIRE_MANIFEST=1, KFD_DEDUP=1".
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
// KFD_SDMA_TIMEOUT: whole seconds, 1 to kMaxSdmaTimeoutSeconds.
Result<uint64_t> parse_seconds_setting(std::string_view value);

} // namespace amdcr
