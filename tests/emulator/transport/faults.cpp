// SPDX-License-Identifier: GPL-2.0-only
#include "faults.h"

#include <cerrno>
#include <charconv>

namespace kfdemu {
namespace {

struct ErrName {
	const char *name;
	int value;
};
constexpr ErrName kErrnos[] = {
	{"EPERM", EPERM}, {"ENOENT", ENOENT}, {"ESRCH", ESRCH}, {"EINTR", EINTR},
	{"EIO", EIO}, {"ENXIO", ENXIO}, {"E2BIG", E2BIG}, {"EBADF", EBADF},
	{"EAGAIN", EAGAIN}, {"ENOMEM", ENOMEM}, {"EACCES", EACCES}, {"EFAULT", EFAULT},
	{"EBUSY", EBUSY}, {"EEXIST", EEXIST}, {"ENODEV", ENODEV}, {"EINVAL", EINVAL},
	{"ENOSPC", ENOSPC}, {"ENOTTY", ENOTTY}, {"ERANGE", ERANGE}, {"ENOSYS", ENOSYS},
	{"ETIME", ETIME}, {"ETIMEDOUT", ETIMEDOUT}, {"ENOTSUP", ENOTSUP},
	{"EOPNOTSUPP", EOPNOTSUPP}, {"ECANCELED", ECANCELED}, {"EDEADLK", EDEADLK},
	{"EADDRINUSE", EADDRINUSE}, {"EOVERFLOW", EOVERFLOW},
};

bool to_uint(std::string_view s, unsigned *out)
{
	auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
	return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

} // namespace

std::optional<std::vector<FaultRule>> parse_faults(std::string_view spec, std::string *error)
{
	std::vector<FaultRule> rules;
	while (!spec.empty()) {
		size_t sep = spec.find_first_of(",;");
		std::string_view one = spec.substr(0, sep);
		spec.remove_prefix(sep == std::string_view::npos ? spec.size() : sep + 1);
		if (one.empty())
			continue;
		FaultRule r;
		std::string target;
		while (!one.empty()) {
			size_t c = one.find(':');
			std::string_view tok = one.substr(0, c);
			one.remove_prefix(c == std::string_view::npos ? one.size() : c + 1);
			unsigned v = 0;
			if (tok.starts_with("nth=")) {
				if (!to_uint(tok.substr(4), &v) || v == 0) {
					*error = "bad nth in '" + std::string(tok) + "'";
					return std::nullopt;
				}
				r.nth = v;
			} else if (tok.starts_with("errno=")) {
				auto name = tok.substr(6);
				bool ok = to_uint(name, &v);
				for (const auto &e : kErrnos)
					if (!ok && name == e.name) {
						v = unsigned(e.value);
						ok = true;
					}
				if (!ok || v == 0) {
					*error = "unknown errno '" + std::string(name) + "'";
					return std::nullopt;
				}
				r.err = int(v);
			} else if (tok == "hang") {
				r.action = FaultRule::Action::Hang;
			} else if (tok == "stall-after") {
				r.action = FaultRule::Action::StallAfter;
			} else if (tok == "stall") {
				r.action = FaultRule::Action::Stall;
			} else if (tok == "every") {
				r.every = true;
			} else if (tok == "fail") {
				r.action = FaultRule::Action::Fail;
			} else {
				target += (target.empty() ? "" : ":") + std::string(tok);
			}
		}
		if (target.empty()) {
			*error = "fault without a target";
			return std::nullopt;
		}
		r.target = std::move(target);
		rules.push_back(std::move(r));
	}
	return rules;
}

} // namespace kfdemu
