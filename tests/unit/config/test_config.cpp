// SPDX-License-Identifier: GPL-2.0-only
// Configuration from the environment: accepted and rejected forms, defaults.
#include <criterion/criterion.h>

#include <cstdlib>
#include <string>

#include "config/config.h"

using namespace amdcr;

namespace {

using Vars = std::map<std::string, std::string, std::less<>>;

bool contains(const std::string &haystack, const std::string &needle)
{
	return haystack.find(needle) != std::string::npos;
}

} // namespace

Test(config, defaults_when_nothing_set)
{
	ConfigLoad l = load_config(Vars{});
	cr_assert(l.warnings.empty());
	for (Check c : kAllChecks)
		cr_assert(l.config.enabled(c), "%s should default to on", check_env_name(c));
	cr_assert_eq(l.config.max_buffer_size, 0u);
}

Test(config, env_names)
{
	cr_assert_str_eq(check_env_name(Check::FwVersion), "KFD_FW_VER_CHECK");
	cr_assert_str_eq(check_env_name(Check::SdmaFwVersion), "KFD_SDMA_FW_VER_CHECK");
	cr_assert_str_eq(check_env_name(Check::CachesCount), "KFD_CACHES_COUNT_CHECK");
	cr_assert_str_eq(check_env_name(Check::NumGws), "KFD_NUM_GWS_CHECK");
	cr_assert_str_eq(check_env_name(Check::VramSize), "KFD_VRAM_SIZE_CHECK");
	cr_assert_str_eq(check_env_name(Check::Numa), "KFD_NUMA_CHECK");
	cr_assert_str_eq(check_env_name(Check::Capability), "KFD_CAPABILITY_CHECK");
}

Test(config, each_switch_off_alone)
{
	for (Check off : kAllChecks) {
		ConfigLoad l = load_config(Vars{{check_env_name(off), "0"}});
		cr_assert(l.warnings.empty());
		for (Check c : kAllChecks)
			cr_assert_eq(l.config.enabled(c), c != off, "%s=0 changed %s wrongly",
				     check_env_name(off), check_env_name(c));
	}
}

Test(config, accepted_boolean_forms)
{
	const struct {
		const char *text;
		bool value;
	} forms[] = {
		{"0", false},	{"1", true},   {"yes", true}, {"no", false}, {"YES", true},
		{"No", false},	{"yEs", true}, {"NO", false}, {"Yes", true},
	};
	for (const auto &f : forms) {
		for (Check c : kAllChecks) {
			// Start from the opposite of the expected value where we can.
			ConfigLoad l = load_config(Vars{{check_env_name(c), f.text}});
			cr_assert(l.warnings.empty(), "%s=%s warned", check_env_name(c), f.text);
			cr_assert_eq(l.config.enabled(c), f.value, "%s=%s", check_env_name(c), f.text);
		}
		auto r = parse_bool_setting(f.text);
		cr_assert(r.ok());
		cr_assert_eq(*r, f.value);
	}
}

Test(config, rejected_boolean_forms_keep_default_and_warn)
{
	const char *bad[] = {"", "2", "-1", "true", "false", "on", "off", "y", "n", " 1", "1 ", "01", "yes!", "0x1"};
	for (const char *b : bad) {
		cr_assert(!parse_bool_setting(b).ok(), "\"%s\" accepted", b);
		ConfigLoad l = load_config(Vars{{"KFD_VRAM_SIZE_CHECK", b}});
		cr_assert(l.config.vram_size_check, "\"%s\" changed the default", b);
		cr_assert_eq(l.warnings.size(), 1u, "\"%s\" gave %zu warnings", b, l.warnings.size());
		const std::string &w = l.warnings[0];
		cr_assert(contains(w, "KFD_VRAM_SIZE_CHECK"), "warning lacks variable: %s", w.c_str());
		cr_assert(contains(w, std::string("\"") + b + "\""), "warning lacks value: %s", w.c_str());
		cr_assert(contains(w, "yes or no"), "warning lacks accepted forms: %s", w.c_str());
	}
}

Test(config, one_bad_variable_does_not_affect_others)
{
	ConfigLoad l = load_config(Vars{{"KFD_FW_VER_CHECK", "maybe"},
					{"KFD_NUMA_CHECK", "no"},
					{"KFD_MAX_BUFFER_SIZE", "12Q"}});
	cr_assert_eq(l.warnings.size(), 2u);
	cr_assert(l.config.fw_version_check);
	cr_assert(!l.config.numa_check);
	cr_assert_eq(l.config.max_buffer_size, 0u);
}

Test(config, accepted_size_forms)
{
	const struct {
		const char *text;
		uint64_t value;
	} forms[] = {
		{"0", 0},
		{"1", 1},
		{"4096", 4096},
		{"1K", 1024},
		{"1k", 1024},
		{"3M", 3ull << 20},
		{"3m", 3ull << 20},
		{"2G", 2ull << 30},
		{"2g", 2ull << 30},
		{"0G", 0},
		{"007", 7},
		{"18446744073709551615", 18446744073709551615ull},
		{"17179869183G", 17179869183ull << 30}, // largest that fits
		{"18014398509481983K", 18014398509481983ull << 10},
	};
	for (const auto &f : forms) {
		auto r = parse_size_setting(f.text);
		cr_assert(r.ok(), "\"%s\" rejected", f.text);
		cr_assert_eq(*r, f.value, "\"%s\" -> %llu", f.text, (unsigned long long)*r);
		ConfigLoad l = load_config(Vars{{"KFD_MAX_BUFFER_SIZE", f.text}});
		cr_assert(l.warnings.empty());
		cr_assert_eq(l.config.max_buffer_size, f.value);
	}
}

Test(config, rejected_size_forms)
{
	const char *bad[] = {"", "K", "-1", "+5", "1.5G", "1KB", "1T", "1 K", " 1", "1 ", "0x10", "12Q",
			     "1GG", "one"};
	for (const char *b : bad) {
		cr_assert(!parse_size_setting(b).ok(), "\"%s\" accepted", b);
		ConfigLoad l = load_config(Vars{{"KFD_MAX_BUFFER_SIZE", "1M"}});
		cr_assert_eq(l.config.max_buffer_size, 1u << 20);
		l = load_config(Vars{{"KFD_MAX_BUFFER_SIZE", b}});
		cr_assert_eq(l.config.max_buffer_size, 0u, "\"%s\" changed the default", b);
		cr_assert_eq(l.warnings.size(), 1u);
		const std::string &w = l.warnings[0];
		cr_assert(contains(w, "KFD_MAX_BUFFER_SIZE"), "%s", w.c_str());
		cr_assert(contains(w, std::string("\"") + b + "\""), "%s", w.c_str());
		cr_assert(contains(w, "K, M or G"), "%s", w.c_str());
	}
}

Test(config, size_overflow)
{
	const char *over[] = {
		"18446744073709551616",	 // 2^64
		"99999999999999999999999",
		"17179869184G", // 2^34 G = 2^64
		"18014398509481984K",
		"17592186044416M",
		"18446744073709551615K",
	};
	for (const char *o : over) {
		auto r = parse_size_setting(o);
		cr_assert(!r.ok(), "\"%s\" accepted", o);
		ConfigLoad l = load_config(Vars{{"KFD_MAX_BUFFER_SIZE", o}});
		cr_assert_eq(l.config.max_buffer_size, 0u);
		cr_assert_eq(l.warnings.size(), 1u);
	}
}

Test(config, with_changes_one_check)
{
	const Config base;
	const Config c = base.with(Check::NumGws, false);
	cr_assert(!c.num_gws_check);
	cr_assert(c.fw_version_check && c.vram_size_check && c.numa_check);
	cr_assert(base.num_gws_check);
}

Test(config, function_source_is_asked_by_name)
{
	std::vector<std::string> asked;
	ConfigLoad l = load_config([&asked](std::string_view name) -> std::optional<std::string> {
		asked.emplace_back(name);
		if (name == "KFD_CAPABILITY_CHECK")
			return std::string("no");
		return std::nullopt;
	});
	cr_assert_eq(asked.size(), 13u); // 7 checks, KFD_MAX_BUFFER_SIZE, KFD_VERIFY, KFD_SDMA_TIMEOUT, KFD_PARALLEL_RESTORE,
					 // KFD_REQUIRE_MANIFEST, KFD_DEDUP
	cr_assert(!l.config.capability_check);
}

Test(config, process_env)
{
	cr_assert_eq(setenv("KFD_SDMA_FW_VER_CHECK", "No", 1), 0);
	cr_assert_eq(setenv("KFD_MAX_BUFFER_SIZE", "64M", 1), 0);
	cr_assert_eq(setenv("KFD_CACHES_COUNT_CHECK", "bogus", 1), 0);
	ConfigLoad l = config_from_process_env();
	cr_assert(!l.config.sdma_fw_version_check);
	cr_assert(l.config.caches_count_check);
	cr_assert_eq(l.config.max_buffer_size, 64u << 20);
	cr_assert_eq(l.warnings.size(), 1u);
	unsetenv("KFD_SDMA_FW_VER_CHECK");
	unsetenv("KFD_MAX_BUFFER_SIZE");
	unsetenv("KFD_CACHES_COUNT_CHECK");
}

Test(config, describe_names_every_check_that_is_off_and_the_budget)
{
	const std::string def = Config{}.describe();
	cr_assert(Config{}.is_default());
	cr_assert_str_eq(def.c_str(), "configuration: every check on, KFD_MAX_BUFFER_SIZE unset (staging: 64 MiB "
				      "per GPU), KFD_VERIFY=1, KFD_SDMA_TIMEOUT=60 s, KFD_PARALLEL_RESTORE=1, "
				      "KFD_REQUIRE_MANIFEST=1, KFD_DEDUP=1");
	Config c = Config{}.with(Check::Numa, false).with(Check::Capability, false);
	c.max_buffer_size = 1 << 20;
	cr_assert(!c.is_default());
	const std::string d = c.describe();
	for (Check k : kAllChecks)
		cr_assert_eq(contains(d, std::string(check_env_name(k)) + "=0"),
			     k == Check::Numa || k == Check::Capability, "%s", d.c_str());
	cr_assert(contains(d, "(the other checks on)"), "%s", d.c_str());
	cr_assert(contains(d, "KFD_MAX_BUFFER_SIZE=1048576 (staging bytes for the whole process"), "%s", d.c_str());
	cr_assert(c != Config{});
	cr_assert(c.with(Check::Numa, true).with(Check::Capability, true) != Config{}, "the budget differs");
}

Test(config, sdma_timeout_parses_whole_seconds)
{
	cr_assert_eq(Config{}.sdma_timeout_s, kDefaultSdmaTimeoutSeconds);
	ConfigLoad l = load_config({{"KFD_SDMA_TIMEOUT", "5"}});
	cr_assert(l.warnings.empty());
	cr_assert_eq(l.config.sdma_timeout_s, 5u);
	cr_assert(contains(l.config.describe(), "KFD_SDMA_TIMEOUT=5 s"));
	cr_assert(!l.config.is_default());
	ConfigLoad top = load_config({{"KFD_SDMA_TIMEOUT", std::to_string(kMaxSdmaTimeoutSeconds)}});
	cr_assert(top.warnings.empty());
	cr_assert_eq(top.config.sdma_timeout_s, kMaxSdmaTimeoutSeconds);
	for (const char *bad : {"0", "", "-1", "5s", "1.5", "86401", "99999999999999999999999"}) {
		ConfigLoad r = load_config({{"KFD_SDMA_TIMEOUT", bad}});
		cr_assert_eq(r.config.sdma_timeout_s, kDefaultSdmaTimeoutSeconds, "KFD_SDMA_TIMEOUT=%s", bad);
		cr_assert_eq(r.warnings.size(), 1u, "KFD_SDMA_TIMEOUT=%s", bad);
		cr_assert(contains(r.warnings[0], "expected whole seconds from 1 to 86400; keeping the default (60)"),
			  "%s", r.warnings[0].c_str());
	}
}

Test(config, verify_defaults_on_and_parses_as_a_boolean)
{
	cr_assert(Config{}.verify);
	cr_assert(contains(Config{}.describe(), ", KFD_VERIFY=1,"));
	for (const char *off : {"0", "no", "NO"}) {
		ConfigLoad l = load_config({{"KFD_VERIFY", off}});
		cr_assert_not(l.config.verify, "KFD_VERIFY=%s", off);
		cr_assert(l.warnings.empty());
		cr_assert(contains(l.config.describe(), ", KFD_VERIFY=0,"));
	}
	ConfigLoad on = load_config({{"KFD_VERIFY", "yes"}});
	cr_assert(on.config.verify);
	ConfigLoad bad = load_config({{"KFD_VERIFY", "maybe"}});
	cr_assert(bad.config.verify, "an invalid value must keep the default");
	cr_assert_eq(bad.warnings.size(), 1u);
	cr_assert(contains(bad.warnings[0], "KFD_VERIFY=\"maybe\""), "%s", bad.warnings[0].c_str());
}

Test(config, parallel_restore_defaults_on_and_parses_as_a_boolean)
{
	cr_assert(Config{}.parallel_restore);
	cr_assert(contains(Config{}.describe(), "KFD_PARALLEL_RESTORE=1"));
	for (const char *off : {"0", "no", "No"}) {
		ConfigLoad l = load_config({{"KFD_PARALLEL_RESTORE", off}});
		cr_assert_not(l.config.parallel_restore, "KFD_PARALLEL_RESTORE=%s", off);
		cr_assert(l.warnings.empty());
		cr_assert(contains(l.config.describe(), "KFD_PARALLEL_RESTORE=0"));
	}
	ConfigLoad bad = load_config({{"KFD_PARALLEL_RESTORE", "2"}});
	cr_assert(bad.config.parallel_restore, "an invalid value must keep the default");
	cr_assert_eq(bad.warnings.size(), 1u);
	cr_assert(contains(bad.warnings[0], "KFD_PARALLEL_RESTORE=\"2\""), "%s", bad.warnings[0].c_str());
}

Test(config, require_manifest_defaults_on_and_parses_as_a_boolean)
{
	cr_assert(Config{}.require_manifest);
	cr_assert(contains(Config{}.describe(), ", KFD_REQUIRE_MANIFEST=1"));
	ConfigLoad l = load_config({{"KFD_REQUIRE_MANIFEST", "0"}});
	cr_assert_not(l.config.require_manifest);
	cr_assert(l.warnings.empty());
	cr_assert(contains(l.config.describe(), ", KFD_REQUIRE_MANIFEST=0"));
	ConfigLoad bad = load_config({{"KFD_REQUIRE_MANIFEST", "later"}});
	cr_assert(bad.config.require_manifest, "an invalid value must keep the default");
	cr_assert_eq(bad.warnings.size(), 1u);
}

Test(config, dedup_defaults_on_and_parses_as_a_boolean)
{
	cr_assert(Config{}.dedup);
	ConfigLoad l = load_config({{"KFD_DEDUP", "no"}});
	cr_assert_not(l.config.dedup);
	cr_assert(l.warnings.empty());
	cr_assert(contains(l.config.describe(), ", KFD_DEDUP=0"));
	ConfigLoad bad = load_config({{"KFD_DEDUP", "sometimes"}});
	cr_assert(bad.config.dedup);
	cr_assert_eq(bad.warnings.size(), 1u);
	cr_assert(contains(bad.warnings[0], "KFD_DEDUP=\"sometimes\""));
}
