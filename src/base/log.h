// SPDX-License-Identifier: GPL-2.0-only
//
// Logging. Every line is prefixed "amdgpu_plugin: " and goes to CRIU's log
// through print_on_level() when the host process exports it (CRIU does; it
// is resolved at run time), else to stderr. Per-GPU messages use
// log_gpu(..., gpu_id, ...) so that a multi-GPU log reads well.
//
// Without CRIU (stderr), debug lines are dropped unless the process sets
// AMDGPU_PLUGIN_LOG_DEBUG: tests want quiet output. Under CRIU, CRIU's own
// log level decides.
#pragma once

#include <cstdint>

namespace amdcr {

enum class LogLevel : unsigned { Error = 1, Warn = 2, Info = 3, Debug = 4 };

void log_msg(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_gpu(LogLevel level, uint32_t gpu_id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define AMDCR_LOG_FN(name, lvl)                                                                    \
	template <typename... A>                                                                   \
	inline void name(const char *fmt, A... a)                                                  \
	{                                                                                          \
		log_msg(lvl, fmt, a...);                                                           \
	}
// clang-format off
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#pragma GCC diagnostic ignored "-Wformat-security"
AMDCR_LOG_FN(log_error, LogLevel::Error)
AMDCR_LOG_FN(log_warn, LogLevel::Warn)
AMDCR_LOG_FN(log_info, LogLevel::Info)
AMDCR_LOG_FN(log_debug, LogLevel::Debug)
#pragma GCC diagnostic pop
// clang-format on
#undef AMDCR_LOG_FN

} // namespace amdcr
