// SPDX-License-Identifier: GPL-2.0-only
//
// amdgpu-img: inspect checkpoints of the amdgpu CRIU plugin (this project's
// and upstream's). See man/amdgpu-img.adoc.
//
//   amdgpu-img show [--json] DIR
//   amdgpu-img verify [-v] DIR
//   amdgpu-img diff [--chunk SIZE] DIR1 DIR2
//   amdgpu-img flatten SRC DST
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "inspect/checkpoint.h"
#include "inspect/diff.h"
#include "inspect/flatten.h"
#include "inspect/show.h"
#include "inspect/verify.h"

namespace {

using namespace amdcr;
using namespace amdcr::inspect;

// Exit statuses (man/amdgpu-img.adoc, EXIT STATUS).
enum Exit : int {
	kOk = 0,	 // show: all decoded; verify: intact; diff: no difference
	kFound = 1,	 // show: an image did not decode; verify: damage; diff: differences
	kTrouble = 2,	 // usage, or the directory cannot be read (diff: any error)
	kNoImages = 3, // verify: no amdgpu image in the directory
};

constexpr const char *kUsage =
	"usage: amdgpu-img show [--json] DIR\n"
	"       amdgpu-img verify [-v|--verbose] DIR\n"
	"       amdgpu-img diff [--chunk SIZE] DIR1 DIR2\n"
	"       amdgpu-img flatten SRC DST\n"
	"Inspects checkpoints of CRIU's amdgpu plugin. See amdgpu-img(1).\n";

int usage(const char *why)
{
	if (why)
		std::fprintf(stderr, "amdgpu-img: %s\n", why);
	std::fputs(kUsage, stderr);
	return kTrouble;
}

void print(const std::string &s)
{
	std::fwrite(s.data(), 1, s.size(), stdout);
}

Result<Checkpoint> load(const std::string &dir)
{
	auto ck = load_checkpoint(dir);
	if (!ck)
		std::fprintf(stderr, "amdgpu-img: %s\n", ck.error().message().c_str());
	return ck;
}

int cmd_show(const std::vector<std::string> &args)
{
	bool json = false;
	std::vector<std::string> dirs;
	for (const auto &a : args) {
		if (a == "--json")
			json = true;
		else if (a.starts_with("-"))
			return usage(("show: unknown option " + a).c_str());
		else
			dirs.push_back(a);
	}
	if (dirs.size() != 1)
		return usage("show takes one directory");
	auto ck = load(dirs[0]);
	if (!ck)
		return kTrouble;
	print(json ? show_json(*ck) : show_text(*ck));
	return all_decoded(*ck) ? kOk : kFound;
}

int cmd_verify(const std::vector<std::string> &args)
{
	bool verbose = false;
	std::vector<std::string> dirs;
	for (const auto &a : args) {
		if (a == "-v" || a == "--verbose")
			verbose = true;
		else if (a.starts_with("-"))
			return usage(("verify: unknown option " + a).c_str());
		else
			dirs.push_back(a);
	}
	if (dirs.size() != 1)
		return usage("verify takes one directory");
	auto ck = load(dirs[0]);
	if (!ck)
		return kTrouble;
	if (!ck->has_images()) {
		std::printf("%s: no amdgpu images\n", dirs[0].c_str());
		return kNoImages;
	}
	// As the restore: KFD_REQUIRE_MANIFEST=0 accepts GPU images without
	// their manifest (a warning).
	ConfigLoad env = config_from_process_env();
	for (const auto &w : env.warnings)
		std::fprintf(stderr, "amdgpu-img: %s\n", w.c_str());
	const VerifyReport r = verify_checkpoint(*ck, env.config.require_manifest);
	print(format_verify(r, verbose));
	return r.problems.empty() ? kOk : kFound;
}

int cmd_diff(const std::vector<std::string> &args)
{
	DiffOptions opt;
	std::vector<std::string> dirs;
	for (size_t i = 0; i < args.size(); i++) {
		if (args[i] == "--chunk") {
			if (i + 1 == args.size())
				return usage("--chunk needs a size");
			auto size = parse_size_setting(args[++i]);
			if (!size)
				return usage(("--chunk " + args[i] + ": " + size.error().message()).c_str());
			opt.chunk_bytes = *size;
		} else if (args[i].starts_with("-")) {
			return usage(("diff: unknown option " + args[i]).c_str());
		} else {
			dirs.push_back(args[i]);
		}
	}
	if (dirs.size() != 2)
		return usage("diff takes two directories");
	auto a = load(dirs[0]);
	if (!a)
		return kTrouble;
	auto b = load(dirs[1]);
	if (!b)
		return kTrouble;
	auto lines = diff_checkpoints(*a, *b, opt);
	if (!lines) {
		std::fprintf(stderr, "amdgpu-img: diff: %s\n", lines.error().message().c_str());
		return kTrouble;
	}
	for (const auto &l : *lines)
		print(l + "\n");
	return lines->empty() ? kOk : kFound;
}

int cmd_flatten(const std::vector<std::string> &args)
{
	if (args.size() != 2 || args[0].starts_with("-") || args[1].starts_with("-"))
		return usage("flatten takes two directories");
	auto r = flatten_checkpoint(args[0], args[1]);
	if (!r) {
		std::fprintf(stderr, "amdgpu-img: flatten: %s\n", r.error().message().c_str());
		return kTrouble;
	}
	print(strprintf("%s: %zu files written, %zu KFD image%s flattened, %llu bytes taken from parent checkpoints, "
			"%llu bytes of deduplicated chunks written out%s\n",
			args[1].c_str(), r->files, r->chains, r->chains == 1 ? "" : "s",
			static_cast<unsigned long long>(r->from_parents), static_cast<unsigned long long>(r->deduplicated),
			r->parent_link.empty() ? "" : ("; parent link kept for CRIU's own images: " + r->parent_link).c_str()));
	return kOk;
}

} // namespace

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage(nullptr);
	const std::string_view cmd = argv[1];
	if (cmd == "-h" || cmd == "--help") {
		std::fputs(kUsage, stdout);
		return kOk;
	}
	const std::vector<std::string> args(argv + 2, argv + argc);
	if (cmd == "show")
		return cmd_show(args);
	if (cmd == "verify")
		return cmd_verify(args);
	if (cmd == "diff")
		return cmd_diff(args);
	if (cmd == "flatten")
		return cmd_flatten(args);
	return usage(("unknown command " + std::string(cmd)).c_str());
}
