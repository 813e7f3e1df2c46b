// SPDX-License-Identifier: GPL-2.0-only
#include "json.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace host::json {
namespace {

class Parser {
public:
	explicit Parser(const std::string &s) : s_(s) {}

	amdcr::Result<Value> document()
	{
		Value v;
		if (!value(v, 0))
			return amdcr::make_error(EINVAL, "bad JSON at offset %zu", pos_);
		ws();
		if (pos_ != s_.size())
			return amdcr::make_error(EINVAL, "trailing data at offset %zu", pos_);
		return v;
	}

private:
	void ws()
	{
		while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' ||
					    s_[pos_] == '\t'))
			pos_++;
	}
	bool eat(char c)
	{
		ws();
		if (pos_ < s_.size() && s_[pos_] == c) {
			pos_++;
			return true;
		}
		return false;
	}
	bool literal(const char *word)
	{
		size_t n = 0;
		while (word[n])
			n++;
		if (s_.compare(pos_, n, word) != 0)
			return false;
		pos_ += n;
		return true;
	}
	bool string(std::string &out)
	{
		if (!eat('"'))
			return false;
		while (pos_ < s_.size()) {
			const char c = s_[pos_++];
			if (c == '"')
				return true;
			if (c != '\\') {
				out += c;
				continue;
			}
			if (pos_ >= s_.size())
				return false;
			const char e = s_[pos_++];
			switch (e) {
			case 'n': out += '\n'; break;
			case 't': out += '\t'; break;
			case 'r': out += '\r'; break;
			case 'b': out += '\b'; break;
			case 'f': out += '\f'; break;
			case 'u': {
				if (pos_ + 4 > s_.size())
					return false;
				const unsigned long cp = std::strtoul(s_.substr(pos_, 4).c_str(), nullptr, 16);
				pos_ += 4;
				if (cp < 0x80) {
					out += static_cast<char>(cp);
				} else if (cp < 0x800) {
					out += static_cast<char>(0xc0 | (cp >> 6));
					out += static_cast<char>(0x80 | (cp & 0x3f));
				} else {
					out += static_cast<char>(0xe0 | (cp >> 12));
					out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
					out += static_cast<char>(0x80 | (cp & 0x3f));
				}
				break;
			}
			default: out += e; break;
			}
		}
		return false;
	}
	bool value(Value &v, int depth)
	{
		if (depth > 64)
			return false;
		ws();
		if (pos_ >= s_.size())
			return false;
		const char c = s_[pos_];
		if (c == '{') {
			pos_++;
			v.type = Value::Type::Object;
			if (eat('}'))
				return true;
			do {
				std::string key;
				if (!string(key) || !eat(':'))
					return false;
				Value item;
				if (!value(item, depth + 1))
					return false;
				v.fields[key] = std::move(item);
			} while (eat(','));
			return eat('}');
		}
		if (c == '[') {
			pos_++;
			v.type = Value::Type::Array;
			if (eat(']'))
				return true;
			do {
				Value item;
				if (!value(item, depth + 1))
					return false;
				v.items.push_back(std::move(item));
			} while (eat(','));
			return eat(']');
		}
		if (c == '"') {
			v.type = Value::Type::String;
			return string(v.text);
		}
		if (literal("true")) {
			v.type = Value::Type::Bool;
			v.boolean = true;
			return true;
		}
		if (literal("false")) {
			v.type = Value::Type::Bool;
			return true;
		}
		if (literal("null"))
			return true;
		const size_t start = pos_;
		while (pos_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[pos_])) ||
					    s_[pos_] == '-' || s_[pos_] == '+' || s_[pos_] == '.' ||
					    s_[pos_] == 'e' || s_[pos_] == 'E'))
			pos_++;
		if (pos_ == start)
			return false;
		v.type = Value::Type::Number;
		v.text = s_.substr(start, pos_ - start);
		return true;
	}

	const std::string &s_;
	size_t pos_ = 0;
};

} // namespace

const Value *Value::get(const std::string &key) const
{
	auto it = fields.find(key);
	return it == fields.end() ? nullptr : &it->second;
}

std::optional<uint64_t> Value::as_u64() const
{
	if (type != Type::Number && type != Type::String)
		return std::nullopt;
	if (text.empty() || text[0] == '-')
		return std::nullopt;
	errno = 0;
	char *end = nullptr;
	const unsigned long long v = std::strtoull(text.c_str(), &end, 0);
	if (errno || *end != '\0')
		return std::nullopt;
	return static_cast<uint64_t>(v);
}

amdcr::Result<Value> parse(const std::string &text) { return Parser(text).document(); }

} // namespace host::json
