// SPDX-License-Identifier: GPL-2.0-only
//
// A small JSON reader for the emulator's control output (kfd-emu ctl ...):
// objects, arrays, strings, numbers (kept as text, so 64-bit addresses are
// exact), true/false/null. No writer: the host writes no JSON.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/result.h"

namespace host::json {

struct Value {
	enum class Type { Null, Bool, Number, String, Array, Object } type = Type::Null;
	bool boolean = false;
	std::string text; // String contents, or a Number's literal
	std::vector<Value> items;
	std::map<std::string, Value> fields;

	const Value *get(const std::string &key) const;
	// A number, or a string holding an integer ("0x1000", "4096").
	std::optional<uint64_t> as_u64() const;
};

amdcr::Result<Value> parse(const std::string &text);

} // namespace host::json
