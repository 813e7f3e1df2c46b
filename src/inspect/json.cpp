// SPDX-License-Identifier: GPL-2.0-only
#include "inspect/json.h"

#include <cstdio>

namespace amdcr::inspect {

void JsonWriter::separate()
{
	if (after_key_) {
		after_key_ = false;
		return;
	}
	if (!first_.empty()) {
		if (!first_.back())
			out_ += ',';
		first_.back() = false;
	}
}

void JsonWriter::raw_string(std::string_view s)
{
	out_ += '"';
	for (const char c : s) {
		const auto u = static_cast<unsigned char>(c);
		switch (c) {
		case '"': out_ += "\\\""; break;
		case '\\': out_ += "\\\\"; break;
		case '\n': out_ += "\\n"; break;
		case '\t': out_ += "\\t"; break;
		case '\r': out_ += "\\r"; break;
		default:
			if (u < 0x20 || u == 0x7f) {
				char buf[8];
				std::snprintf(buf, sizeof(buf), "\\u%04x", u);
				out_ += buf;
			} else {
				out_ += c;
			}
		}
	}
	out_ += '"';
}

JsonWriter &JsonWriter::begin_object()
{
	separate();
	out_ += '{';
	first_.push_back(true);
	return *this;
}

JsonWriter &JsonWriter::end_object()
{
	out_ += '}';
	first_.pop_back();
	return *this;
}

JsonWriter &JsonWriter::begin_array()
{
	separate();
	out_ += '[';
	first_.push_back(true);
	return *this;
}

JsonWriter &JsonWriter::end_array()
{
	out_ += ']';
	first_.pop_back();
	return *this;
}

JsonWriter &JsonWriter::key(std::string_view k)
{
	separate();
	raw_string(k);
	out_ += ':';
	after_key_ = true;
	return *this;
}

JsonWriter &JsonWriter::value(std::string_view s)
{
	separate();
	raw_string(s);
	return *this;
}

JsonWriter &JsonWriter::number(uint64_t n)
{
	separate();
	out_ += std::to_string(n);
	return *this;
}

JsonWriter &JsonWriter::value(bool b)
{
	separate();
	out_ += b ? "true" : "false";
	return *this;
}

JsonWriter &JsonWriter::null()
{
	separate();
	out_ += "null";
	return *this;
}

} // namespace amdcr::inspect
