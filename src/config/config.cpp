// SPDX-License-Identifier: GPL-2.0-only
#include "config/config.h"

#include <cstdlib>
#include <limits>
#include <utility>

namespace amdcr {

namespace {

constexpr const char *kBoolForms = "0, 1, yes or no (case-insensitive)";
constexpr const char *kSizeForms =
	"a decimal byte count with an optional K, M or G suffix (x1024); 0 = the built-in bound "
	"of 64 MiB per GPU";
static_assert(kDefaultStagingBound == 64ull << 20, "kSizeForms names the built-in bound");

struct CheckInfo {
	Check check;
	const char *env;
	bool Config::*field;
};

constexpr CheckInfo kCheckTable[] = {
	{Check::FwVersion, "KFD_FW_VER_CHECK", &Config::fw_version_check},
	{Check::SdmaFwVersion, "KFD_SDMA_FW_VER_CHECK", &Config::sdma_fw_version_check},
	{Check::CachesCount, "KFD_CACHES_COUNT_CHECK", &Config::caches_count_check},
	{Check::NumGws, "KFD_NUM_GWS_CHECK", &Config::num_gws_check},
	{Check::VramSize, "KFD_VRAM_SIZE_CHECK", &Config::vram_size_check},
	{Check::Numa, "KFD_NUMA_CHECK", &Config::numa_check},
	{Check::Capability, "KFD_CAPABILITY_CHECK", &Config::capability_check},
};

const CheckInfo &info(Check check)
{
	for (const auto &i : kCheckTable)
		if (i.check == check)
			return i;
	// Every enumerator is in the table.
	__builtin_unreachable();
}

char lower(char c)
{
	return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool iequals(std::string_view a, std::string_view b)
{
	if (a.size() != b.size())
		return false;
	for (size_t i = 0; i < a.size(); i++)
		if (lower(a[i]) != lower(b[i]))
			return false;
	return true;
}

} // namespace

const char *check_env_name(Check check)
{
	return info(check).env;
}

bool Config::enabled(Check check) const
{
	return this->*(info(check).field);
}

Config Config::with(Check check, bool on) const
{
	Config copy = *this;
	copy.*(info(check).field) = on;
	return copy;
}

std::string Config::describe() const
{
	std::string off;
	for (const auto &i : kCheckTable)
		if (!(this->*(i.field)))
			off += strprintf("%s=0 ", i.env);
	std::string out = "configuration: ";
	out += off.empty() ? "every check on" : off + "(the other checks on)";
	if (max_buffer_size == 0)
		out += strprintf(", %s unset (staging: %llu MiB per GPU)", kMaxBufferSizeEnv,
				 static_cast<unsigned long long>(kDefaultStagingBound >> 20));
	else
		out += strprintf(", %s=%llu (staging bytes for the whole process, shared by its GPUs)",
				 kMaxBufferSizeEnv, static_cast<unsigned long long>(max_buffer_size));
	out += strprintf(", %s=%d, %s=%llu s, %s=%d, %s=%d, %s=%d", kVerifyEnv, verify ? 1 : 0, kSdmaTimeoutEnv,
			 static_cast<unsigned long long>(sdma_timeout_s), kParallelRestoreEnv, parallel_restore ? 1 : 0,
			 kRequireManifestEnv, require_manifest ? 1 : 0, kDedupEnv, dedup ? 1 : 0);
	return out;
}

Result<bool> parse_bool_setting(std::string_view value)
{
	if (value == "1" || iequals(value, "yes"))
		return true;
	if (value == "0" || iequals(value, "no"))
		return false;
	return make_error(EINVAL, "expected %s", kBoolForms);
}

Result<uint64_t> parse_size_setting(std::string_view value)
{
	size_t digits = 0;
	while (digits < value.size() && value[digits] >= '0' && value[digits] <= '9')
		digits++;
	if (digits == 0)
		return make_error(EINVAL, "expected %s", kSizeForms);

	uint64_t multiplier = 1;
	std::string_view suffix = value.substr(digits);
	if (suffix.size() > 1)
		return make_error(EINVAL, "expected %s", kSizeForms);
	if (suffix.size() == 1) {
		switch (lower(suffix[0])) {
		case 'k':
			multiplier = uint64_t{1} << 10;
			break;
		case 'm':
			multiplier = uint64_t{1} << 20;
			break;
		case 'g':
			multiplier = uint64_t{1} << 30;
			break;
		default:
			return make_error(EINVAL, "expected %s", kSizeForms);
		}
	}

	constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
	uint64_t n = 0;
	for (size_t i = 0; i < digits; i++) {
		const uint64_t d = static_cast<uint64_t>(value[i] - '0');
		if (n > (kMax - d) / 10)
			return make_error(ERANGE, "value does not fit in 64 bits; expected %s",
					  kSizeForms);
		n = n * 10 + d;
	}
	if (n > kMax / multiplier)
		return make_error(ERANGE, "value times the suffix does not fit in 64 bits; expected %s",
				  kSizeForms);
	return n * multiplier;
}

Result<uint64_t> parse_seconds_setting(std::string_view value)
{
	uint64_t n = 0;
	bool valid = !value.empty();
	for (size_t i = 0; valid && i < value.size(); i++) {
		valid = value[i] >= '0' && value[i] <= '9';
		n = n * 10 + static_cast<uint64_t>(value[i] - '0');
		valid = valid && n <= kMaxSdmaTimeoutSeconds; // also keeps n from overflowing
	}
	if (!valid || n == 0)
		return make_error(EINVAL, "expected whole seconds from 1 to %llu",
				  static_cast<unsigned long long>(kMaxSdmaTimeoutSeconds));
	return n;
}

ConfigLoad load_config(const EnvSource &env)
{
	ConfigLoad out;
	for (const auto &i : kCheckTable) {
		const std::optional<std::string> v = env(i.env);
		if (!v)
			continue;
		auto parsed = parse_bool_setting(*v);
		if (parsed)
			out.config.*(i.field) = *parsed;
		else
			out.warnings.push_back(strprintf("%s=\"%s\" is not valid: %s; keeping the default (%s)",
							 i.env, v->c_str(), parsed.error().message().c_str(),
							 out.config.*(i.field) ? "1" : "0"));
	}

	if (const std::optional<std::string> v = env(kMaxBufferSizeEnv)) {
		auto parsed = parse_size_setting(*v);
		if (parsed)
			out.config.max_buffer_size = *parsed;
		else
			out.warnings.push_back(strprintf("%s=\"%s\" is not valid: %s; keeping the default (%llu)",
							 kMaxBufferSizeEnv, v->c_str(),
							 parsed.error().message().c_str(),
							 static_cast<unsigned long long>(out.config.max_buffer_size)));
	}

	// The booleans outside the check table.
	const std::pair<const char *, bool Config::*> switches[] = {
		{kVerifyEnv, &Config::verify},
		{kParallelRestoreEnv, &Config::parallel_restore},
		{kRequireManifestEnv, &Config::require_manifest},
		{kDedupEnv, &Config::dedup},
	};
	for (const auto &[name, field] : switches) {
		const std::optional<std::string> v = env(name);
		if (!v)
			continue;
		auto parsed = parse_bool_setting(*v);
		if (parsed)
			out.config.*field = *parsed;
		else
			out.warnings.push_back(strprintf("%s=\"%s\" is not valid: %s; keeping the default (%s)",
							 name, v->c_str(), parsed.error().message().c_str(),
							 out.config.*field ? "1" : "0"));
	}
	if (const std::optional<std::string> v = env(kSdmaTimeoutEnv)) {
		auto parsed = parse_seconds_setting(*v);
		if (parsed)
			out.config.sdma_timeout_s = *parsed;
		else
			out.warnings.push_back(strprintf("%s=\"%s\" is not valid: %s; keeping the default (%llu)",
							 kSdmaTimeoutEnv, v->c_str(),
							 parsed.error().message().c_str(),
							 static_cast<unsigned long long>(out.config.sdma_timeout_s)));
	}
	return out;
}

ConfigLoad load_config(const std::map<std::string, std::string, std::less<>> &vars)
{
	return load_config([&vars](std::string_view name) -> std::optional<std::string> {
		auto it = vars.find(name);
		if (it == vars.end())
			return std::nullopt;
		return it->second;
	});
}

ConfigLoad config_from_process_env()
{
	return load_config([](std::string_view name) -> std::optional<std::string> {
		const char *v = std::getenv(std::string(name).c_str());
		if (!v)
			return std::nullopt;
		return std::string(v);
	});
}

} // namespace amdcr
