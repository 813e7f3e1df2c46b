// SPDX-License-Identifier: GPL-2.0-only
//
// Logging. Every line is prefixed "amdgpu_plugin: " (errors and warnings
// then "Error: " / "Warn: ", as CRIU's log shows no level) and goes to CRIU's log
// through print_on_level() when the host process exports it (CRIU does; it
// is resolved at run time), else to stderr. Per-GPU messages use
// log_gpu(..., gpu_id, ...) so that a multi-GPU log reads well.
//
// The levels and what the plugin writes at each (man page, DIAGNOSTICS):
//   Error, Warn  something failed or was refused (CRIU levels 1 and 2).
//   Notice       shown at CRIU's default level (2, LOG_WARN: criu without
//                -v), without a tag: only the one summary line of a dump or
//                restore and the configuration when it is not the default.
//   Info         (-v3) progress of long copies, images restored unverified.
//   Debug        (-v4) everything else.
// Every message names a GPU by its gpu_id in hex, "gpu 0x%04x" (CTest
// docs_message_style checks every format string under src/).
//
// Without CRIU (stderr), debug lines are dropped unless the process sets
// AMDGPU_PLUGIN_LOG_DEBUG: tests want quiet output. Under CRIU, CRIU's own
// log level decides.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace amdcr {

// The name CRIU knows the plugin by (its descriptor, the inventory), which
// also starts every log line.
inline constexpr const char *kPluginName = "amdgpu_plugin";

enum class LogLevel : unsigned { Error, Warn, Notice, Info, Debug };

// The CRIU log level (criu/include/log.h: LOG_ERROR 1 .. LOG_DEBUG 4) a
// line of `level` is printed at.
unsigned criu_log_level(LogLevel level);

void log_msg(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_gpu(LogLevel level, uint32_t gpu_id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

// Lines kept to be printed later, by another thread. CRIU's print_on_level()
// formats every line in one static buffer, so while CRIU's own thread may
// be logging, a thread of the plugin beside it (the parallel restore's)
// must not call it: its lines wait here until CRIU's thread is in the
// plugin again and prints them (flush()). Thread-safe.
class DeferredLog {
public:
	void add(LogLevel level, std::string line);
	// Prints the lines kept so far, in order, on the calling thread.
	void flush();

private:
	std::mutex mu_;
	std::vector<std::pair<LogLevel, std::string>> lines_;
};

// log_msg and log_gpu into `deferred`, or printed now when it is nullptr.
void log_msg_to(DeferredLog *deferred, LogLevel level, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_gpu_to(DeferredLog *deferred, LogLevel level, uint32_t gpu_id, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

// One function per level; the compiler checks every format against its
// arguments.
void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_notice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

} // namespace amdcr
