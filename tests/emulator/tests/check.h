// SPDX-License-Identifier: GPL-2.0-only
//
// A minimal test harness for programs that run under kfd-emu (Criterion's
// worker processes and IPC would only add noise to what the shim sees).
// Each case passes when none of its checks failed; the program prints
// "N passed, N failed" and exits non-zero on any failure.
#pragma once

#include "../transport/profile.h"
#include "../transport/protocol.h"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <set>
#include <string_view>

namespace kfdemu::test {

// A whole file, read through stdio (so through the shim); a marker when it
// cannot be opened.
inline std::string slurp(const std::string &path)
{
	FILE *f = std::fopen(path.c_str(), "r");
	if (!f)
		return "<cannot open " + path + ">";
	std::string s;
	char buf[4096];
	size_t n;
	while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
		s.append(buf, n);
	std::fclose(f);
	return s;
}

// The names in a directory, without . entries.
inline std::set<std::string> list_dir(const std::string &path)
{
	std::set<std::string> out;
	DIR *d = ::opendir(path.c_str());
	if (!d)
		return out;
	while (dirent *e = ::readdir(d))
		if (e->d_name[0] != '.')
			out.insert(e->d_name);
	::closedir(d);
	return out;
}

struct Tally {
	int passed = 0, failed = 0, checks_failed = 0;
};

inline Tally &tally()
{
	static Tally t;
	return t;
}

inline bool check(bool ok, const char *what, const char *file, int line)
{
	if (!ok) {
		tally().checks_failed++;
		std::printf("  FAIL %s:%d: %s\n", file, line, what);
	}
	return ok;
}

template <typename A, typename B>
bool check_eq(const A &a, const B &b, const char *ea, const char *eb, const char *file, int line)
{
	if (a == b)
		return true;
	tally().checks_failed++;
	if constexpr (std::is_integral_v<A> && std::is_integral_v<B>)
		std::printf("  FAIL %s:%d: %s == %s (%lld vs %lld)\n", file, line, ea, eb,
			    static_cast<long long>(a), static_cast<long long>(b));
	else
		std::printf("  FAIL %s:%d: %s == %s\n", file, line, ea, eb);
	return false;
}

#define CHECK(cond) ::kfdemu::test::check(bool(cond), #cond, __FILE__, __LINE__)
#define CHECK_EQ(a, b) ::kfdemu::test::check_eq((a), (b), #a, #b, __FILE__, __LINE__)

inline void run(const char *name, const std::function<void()> &fn)
{
	const int before = tally().checks_failed;
	std::printf("[ RUN  ] %s\n", name);
	std::fflush(stdout);
	fn();
	const bool ok = tally().checks_failed == before;
	(ok ? tally().passed : tally().failed)++;
	std::printf("[ %s ] %s\n", ok ? " OK " : "FAIL", name);
	std::fflush(stdout);
}

inline int summary()
{
	std::printf("%d passed, %d failed\n", tally().passed, tally().failed);
	return tally().failed || !tally().passed ? 1 : 0;
}

// The machine the launcher was given, rebuilt from the same arguments
// (--machine NAME and the overrides), so expectations come from the
// profile, not from what the emulator happens to publish.
inline MachineDesc machine_from_args(int argc, char **argv)
{
	std::string name = "MI100";
	Overrides ov;
	for (int i = 1; i + 1 < argc; i++) {
		std::string_view a = argv[i];
		if (a == "--machine")
			name = argv[++i];
		else if (a == "--gpu-ids")
			parse_u32_list(argv[++i], &ov.gpu_ids);
		else if (a == "--minors")
			parse_u32_list(argv[++i], &ov.minors);
		else if (a == "--vram")
			parse_size_list(argv[++i], &ov.vram);
	}
	std::string err;
	auto m = load_machine(name, KFDEMU_PROFILE_DIR, &err);
	if (!m || !apply_overrides(*m, ov).empty()) {
		std::fprintf(stderr, "cannot build machine %s: %s\n", name.c_str(), err.c_str());
		std::exit(2);
	}
	return *m;
}

inline uint64_t prop(const NodeDesc &n, std::string_view key)
{
	for (const auto &[k, v] : n.properties)
		if (k == key)
			return v;
	return ~0ull;
}

// One request to the daemon of this kfd-emu instance (KFDEMU_SOCKET):
// the reply's payload, and its result in *result. "" on transport errors.
inline std::string daemon_request(wire::Op op, std::string_view payload, int64_t *result = nullptr)
{
	const char *sock = std::getenv("KFDEMU_SOCKET");
	if (!sock)
		return {};
	int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock);
	if (s < 0 || ::connect(s, reinterpret_cast<sockaddr *>(&sa), sizeof sa)) {
		if (s >= 0)
			::close(s);
		return {};
	}
	wire::Request rq{};
	rq.op = op;
	rq.tid = ::gettid();
	rq.len = uint32_t(payload.size());
	std::string msg(reinterpret_cast<const char *>(&rq), sizeof rq);
	msg += payload;
	wire::Reply rp{};
	std::string out;
	if (!wire::send_all(s, msg.data(), msg.size()) && !wire::recv_all(s, &rp, sizeof rp)) {
		std::string ents(rp.nfds * sizeof(wire::FdEntry), '\0');
		out.assign(rp.len, '\0');
		if ((rp.nfds && wire::recv_all(s, ents.data(), ents.size())) ||
		    (rp.len && wire::recv_all(s, out.data(), rp.len)))
			out.clear();
		if (result)
			*result = rp.result;
	}
	::close(s);
	return out;
}

inline std::string introspect(std::string_view query)
{
	return daemon_request(wire::Op::Introspect, query);
}

// Replaces the model's fault rules at run time (as `kfd-emu ctl faults`).
inline int64_t set_faults(std::string_view spec)
{
	int64_t r = -1;
	daemon_request(wire::Op::SetFaults, spec, &r);
	return r;
}

// The number after "\"key\":" in a flat JSON answer, or -1.
inline long long json_number(const std::string &json, std::string_view key)
{
	const std::string k = "\"" + std::string(key) + "\":";
	size_t p = json.find(k);
	if (p == std::string::npos)
		return -1;
	return std::strtoll(json.c_str() + p + k.size(), nullptr, 0);
}

} // namespace kfdemu::test
