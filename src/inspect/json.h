// SPDX-License-Identifier: GPL-2.0-only
//
// A small streaming JSON writer for amdgpu-img's --json output: objects,
// arrays, strings (escaped per RFC 8259), unsigned 64-bit integers (written
// exactly: readers that hold numbers as doubles lose precision above 2^53),
// booleans and null. Compact, one document, then a newline from str().
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace amdcr::inspect {

class JsonWriter {
public:
	JsonWriter &begin_object();
	JsonWriter &end_object();
	JsonWriter &begin_array();
	JsonWriter &end_array();
	// Inside an object: the key of the next value.
	JsonWriter &key(std::string_view k);

	JsonWriter &value(std::string_view s);
	JsonWriter &value(const char *s) { return value(std::string_view(s)); }
	template <std::unsigned_integral T>
		requires(!std::same_as<T, bool>)
	JsonWriter &value(T n)
	{
		return number(n);
	}
	JsonWriter &value(bool b);
	JsonWriter &null();

	// key(k).value(v)
	template <typename T>
	JsonWriter &field(std::string_view k, const T &v)
	{
		key(k);
		return value(v);
	}

	// The document so far, with a final newline.
	std::string str() const { return out_ + "\n"; }

private:
	JsonWriter &number(uint64_t n);
	void separate();
	void raw_string(std::string_view s);

	std::string out_;
	std::vector<bool> first_; // per open container: no element yet
	bool after_key_ = false;
};

} // namespace amdcr::inspect
