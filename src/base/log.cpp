// SPDX-License-Identifier: GPL-2.0-only
#include "base/log.h"

#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "amdgpu_plugin/criu_plugin_abi.h"
#include "base/result.h"

namespace amdcr {
namespace {

// Resolved once; immutable afterwards.
criu_print_on_level_t *criu_printer()
{
	static criu_print_on_level_t *const fn =
		reinterpret_cast<criu_print_on_level_t *>(dlsym(RTLD_DEFAULT, "print_on_level"));
	return fn;
}

bool stderr_debug()
{
	static const bool on = std::getenv("AMDGPU_PLUGIN_LOG_DEBUG") != nullptr;
	return on;
}

// CRIU's log shows no level of its own: its error and warning lines say
// so in their text ("Error (file:line): ..."), and so do ours.
const char *level_tag(LogLevel level)
{
	switch (level) {
	case LogLevel::Error:
		return "Error: ";
	case LogLevel::Warn:
		return "Warn: ";
	default:
		return "";
	}
}

void emit(LogLevel level, const std::string &line)
{
	if (criu_print_on_level_t *p = criu_printer()) {
		p(criu_log_level(level), "%s: %s%s\n", kPluginName, level_tag(level), line.c_str());
		return;
	}
	if (level == LogLevel::Debug && !stderr_debug())
		return;
	std::fprintf(stderr, "%s: %s%s\n", kPluginName, level_tag(level), line.c_str());
}

} // namespace

unsigned criu_log_level(LogLevel level)
{
	switch (level) {
	case LogLevel::Error:
		return 1;
	case LogLevel::Warn:
	case LogLevel::Notice:
		return 2;
	case LogLevel::Info:
		return 3;
	case LogLevel::Debug:
		break;
	}
	return 4;
}

namespace {

// Every log function: formats `prefix` + `fmt`, then prints the line now,
// or keeps it in `deferred` when that is set.
__attribute__((format(printf, 4, 0))) void vlog(DeferredLog *deferred, LogLevel level, std::string prefix,
						  const char *fmt, va_list ap)
{
	std::string s = std::move(prefix) + vstrprintf(fmt, ap);
	if (deferred)
		deferred->add(level, std::move(s));
	else
		emit(level, s);
}

std::string gpu_prefix(uint32_t gpu_id) { return strprintf("gpu 0x%04x: ", gpu_id); }

} // namespace

void log_msg(LogLevel level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(nullptr, level, {}, fmt, ap);
	va_end(ap);
}

#define AMDCR_LOG_AT(name, level)                                                                  \
	void name(const char *fmt, ...)                                                            \
	{                                                                                          \
		va_list ap;                                                                        \
		va_start(ap, fmt);                                                                 \
		vlog(nullptr, level, {}, fmt, ap);                                                 \
		va_end(ap);                                                                        \
	}
AMDCR_LOG_AT(log_error, LogLevel::Error)
AMDCR_LOG_AT(log_warn, LogLevel::Warn)
AMDCR_LOG_AT(log_notice, LogLevel::Notice)
AMDCR_LOG_AT(log_info, LogLevel::Info)
AMDCR_LOG_AT(log_debug, LogLevel::Debug)
#undef AMDCR_LOG_AT

void log_gpu(LogLevel level, uint32_t gpu_id, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(nullptr, level, gpu_prefix(gpu_id), fmt, ap);
	va_end(ap);
}

void DeferredLog::add(LogLevel level, std::string line)
{
	std::lock_guard lk(mu_);
	lines_.emplace_back(level, std::move(line));
}

void DeferredLog::flush()
{
	std::vector<std::pair<LogLevel, std::string>> lines;
	{
		std::lock_guard lk(mu_);
		lines.swap(lines_);
	}
	for (const auto &[level, line] : lines)
		emit(level, line);
}

void log_msg_to(DeferredLog *deferred, LogLevel level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(deferred, level, {}, fmt, ap);
	va_end(ap);
}

void log_gpu_to(DeferredLog *deferred, LogLevel level, uint32_t gpu_id, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog(deferred, level, gpu_prefix(gpu_id), fmt, ap);
	va_end(ap);
}

} // namespace amdcr
