// SPDX-License-Identifier: GPL-2.0-only
// CreatedFiles (plugin/created_files.h): a failed dump removes the files it
// committed, by inode, and no other: not an older checkpoint's file under a
// name it never committed, not a file put under one of its names since.
#include <criterion/criterion.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../common/assert_ok.h"
#include "image/image_dir.h"
#include "plugin/created_files.h"

using namespace amdcr;
namespace fs = std::filesystem;

namespace {

struct Dir {
	fs::path path;
	Dir()
	{
		char tmpl[] = "/tmp/amdcr-created-XXXXXX";
		cr_assert_not_null(mkdtemp(tmpl));
		path = tmpl;
	}
	~Dir() { fs::remove_all(path); }
	void put(const std::string &name, const std::string &text) const { std::ofstream(path / name) << text; }
	std::string get(const std::string &name) const
	{
		std::ifstream f(path / name);
		return std::string((std::istreambuf_iterator<char>(f)), {});
	}
};

void commit(const ImageDir &dir, const std::string &name, const std::string &text)
{
	auto f = dir.create(name);
	cr_assert_ok(f);
	cr_assert_ok(f->write(text.data(), text.size()));
	cr_assert_ok(f->commit());
}

} // namespace

Test(created_files, removes_what_it_committed_and_nothing_else)
{
	Dir d;
	d.put("amdgpu-pages-1-a6cc.img", "older checkpoint, GPU a6cc");
	d.put("amdgpu-pages-1-b7dd.img", "older checkpoint, GPU b7dd");
	d.put("amdgpu-kfd-1.img", "older checkpoint, KFD");
	auto dir = ImageDir::open(d.path.string());
	cr_assert_ok(dir);
	CreatedFiles created;
	created.watch(*dir);
	// The dump committed one GPU's pages file (replacing the older one),
	// then failed before the other GPU's and before its KFD image.
	commit(*dir, "amdgpu-pages-1-a6cc.img", "this dump");
	commit(*dir, "amdgpu-renderD-2.img", "this dump");
	cr_assert_eq(created.size(), 2u);
	// Someone replaced one of them since.
	d.put("amdgpu-renderD-2.img.new", "theirs");
	fs::rename(d.path / "amdgpu-renderD-2.img.new", d.path / "amdgpu-renderD-2.img");
	const auto r = created.remove_all(*dir, "test");
	cr_assert_eq(r.removed, 1u);
	cr_assert_eq(r.replaced, 1u);
	cr_assert_eq(r.put_back, 1u);
	cr_assert_eq(r.gone + r.failed, 0u);
	cr_assert_eq(d.get("amdgpu-pages-1-a6cc.img"), "older checkpoint, GPU a6cc",
		     "its own file is removed and the older one it replaced put back");
	cr_assert_eq(d.get("amdgpu-pages-1-b7dd.img"), "older checkpoint, GPU b7dd", "a name it never wrote is kept");
	cr_assert_eq(d.get("amdgpu-kfd-1.img"), "older checkpoint, KFD");
	cr_assert_eq(d.get("amdgpu-renderD-2.img"), "theirs", "a file put under its name since is kept");
	cr_assert_eq(created.size(), 0u);
}

namespace {

std::vector<std::string> hidden(const fs::path &dir)
{
	std::vector<std::string> out;
	for (const auto &e : fs::directory_iterator(dir))
		if (e.path().filename().string().starts_with("."))
			out.push_back(e.path().filename().string());
	return out;
}

} // namespace

// A file replaced twice by one dump (a name committed twice) comes back as
// the older checkpoint had it; a dump that succeeded drops what it kept.
Test(created_files, puts_back_what_it_replaced_or_drops_it_at_success)
{
	Dir d;
	d.put("amdgpu-kfd-1.img", "older checkpoint, KFD");
	auto dir = ImageDir::open(d.path.string());
	cr_assert_ok(dir);
	CreatedFiles failed;
	failed.watch(*dir);
	commit(*dir, "amdgpu-kfd-1.img", "this dump, first");
	commit(*dir, "amdgpu-kfd-1.img", "this dump, second");
	cr_assert_eq(hidden(d.path).size(), 2u, "each replaced file kept under a hidden name");
	const auto r = failed.remove_all(*dir, "test");
	cr_assert_eq(r.removed, 2u);
	cr_assert_eq(r.put_back, 2u);
	cr_assert_eq(d.get("amdgpu-kfd-1.img"), "older checkpoint, KFD");
	cr_assert(hidden(d.path).empty(), "nothing hidden is left");

	CreatedFiles succeeded;
	succeeded.watch(*dir);
	commit(*dir, "amdgpu-kfd-1.img", "this dump");
	commit(*dir, "amdgpu-pages-1-a6cc.img", "this dump, new name");
	cr_assert_eq(hidden(d.path).size(), 1u);
	succeeded.drop_kept(*dir);
	cr_assert(hidden(d.path).empty(), "the kept file is removed once the dump succeeded");
	cr_assert_eq(d.get("amdgpu-kfd-1.img"), "this dump");
	cr_assert_eq(succeeded.size(), 0u);
}
