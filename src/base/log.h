// SPDX-License-Identifier: GPL-2.0-only
//
// Logging. Every line is prefixed "amdgpu_plugin: " (errors and warnings
// then "Error: " / "Warn: ", as CRIU's log shows no level) and goes to CRIU's log
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

// The name CRIU knows the plugin by (its descriptor, the inventory), which
// also starts every log line.
inline constexpr const char *kPluginName = "amdgpu_plugin";

enum class LogLevel : unsigned { Error = 1, Warn = 2, Info = 3, Debug = 4 };

void log_msg(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_gpu(LogLevel level, uint32_t gpu_id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

// One function per level; the compiler checks every format against its
// arguments.
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace amdcr
