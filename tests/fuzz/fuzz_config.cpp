// SPDX-License-Identifier: GPL-2.0-only
//
// The KFD_* environment parser. The input is NAME=VALUE lines (the last
// line's value also goes to the value parsers directly). Every value is
// either accepted or reported as one warning; a size the parser accepts
// prints back (describe) as the number it parsed.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "config/config.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	using namespace amdcr;
	const std::string_view text(reinterpret_cast<const char *>(data), size);
	std::map<std::string, std::string, std::less<>> vars;
	std::string_view last;
	size_t start = 0;
	while (start <= text.size()) {
		size_t end = text.find('\n', start);
		if (end == std::string_view::npos)
			end = text.size();
		const std::string_view line = text.substr(start, end - start);
		const size_t eq = line.find('=');
		if (eq != std::string_view::npos) {
			vars[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
			last = line.substr(eq + 1);
		}
		start = end + 1;
	}
	const ConfigLoad load = load_config(vars);
	fuzz::require(load.warnings.size() <= vars.size(), "at most one warning per variable");
	(void)load.config.describe();

	(void)parse_bool_setting(last);
	if (auto bytes = parse_size_setting(last); bytes) {
		auto again = parse_size_setting(std::to_string(*bytes));
		fuzz::require(again.ok() && *again == *bytes, "an accepted size reads back as its number");
	}
	return 0;
}
