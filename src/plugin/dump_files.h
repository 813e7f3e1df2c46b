// SPDX-License-Identifier: GPL-2.0-only
//
// DumpFiles: what one dump writes and how it is bound together. The image
// directory of each hook (image_dir()), the files this dump created there
// (CreatedFiles, by name and inode), the dump's identity (drawn with its
// first GPU file, the same in every image: image/binding.h), the plugin's
// entry in CRIU's inventory, and at the end either the manifest that binds
// the GPU images to CRIU's (write_manifest()) or the removal of exactly
// the files this dump created (discard_created()).
//
// Nothing half-written: every image file is written under a temporary name
// and renamed onto its final name when complete (image/image_dir.h), and
// recorded here by name and inode once renamed; when a hook of ours fails,
// and when the dump ends with an error (whichever part of CRIU failed),
// exactly those files are removed, so no restore or inspector finds a
// checkpoint that looks complete but is not. A file of the directory that
// this dump did not write (an older checkpoint's file of another name, or
// of a name this dump had not reached yet) is never removed; one of the
// same name that this dump did write was replaced by it, as CRIU replaces
// its own images.
#pragma once

#include <functional>
#include <optional>

#include "base/result.h"
#include "image/binding.h"
#include "image/image_dir.h"
#include "plugin/created_files.h"
#include "plugin/session.h"

namespace amdcr {

class DumpFiles {
public:
	// `on_open` is given every image directory image_dir() opens, before
	// any file is created in it (the guardian learns its temporary files).
	DumpFiles(const SessionEnv &env, std::function<void(ImageDir &)> on_open)
		: env_(env), on_open_(std::move(on_open))
	{
	}
	DumpFiles(const DumpFiles &) = delete;
	DumpFiles &operator=(const DumpFiles &) = delete;

	// The image directory of this hook (session_image_dir), whose commits
	// are recorded as this dump's files.
	Result<ImageDir> image_dir();
	// The binding of this dump's image for CRIU file `id`: the dump's
	// identity (drawn on first use), the file id, and pages_sealed (the
	// dump seals every pages file it writes, GpuCopyJob::pages_seal).
	Result<DumpBinding> binding_for(int id);
	// The plugin's name into CRIU's inventory (once): a checkpoint with
	// GPU state of ours asks for this plugin at restore.
	void add_to_inventory();
	// Removes every file this dump created (the dump failed: `why`) that
	// is still the file it wrote, and puts back the older files they had
	// replaced; logs what it did.
	void discard_created(const char *why);
	// A dump that succeeded and wrote GPU images: its manifest
	// (image/binding.h), once CRIU has closed its own images (exit(DUMP)).
	// Failing, it logs an error: CRIU's dump is over.
	void write_manifest();
	// The dump succeeded: removes the older files its own replaced, kept
	// until now (CreatedFiles::drop_kept), and the files an earlier dump
	// into the directory kept and never put back or removed (it was
	// killed): a kept file (image/image_dir.h, kept_name) of a name this
	// dump wrote that carries another dump identity of this plugin
	// (carried_dump_id). One that carries none is left, with a warning
	// naming it: nothing proves it this plugin's.
	void drop_replaced();

private:
	// The second half of drop_replaced(): `written` the names this dump
	// committed.
	void drop_stale_kept(const ImageDir &dir, const std::vector<std::string> &written);

	const SessionEnv &env_;
	std::function<void(ImageDir &)> on_open_;
	CreatedFiles created_; // image files of this dump, by name and inode
	std::optional<DumpId> dump_id_; // the same in every image of this dump
	bool in_inventory_ = false;
};

} // namespace amdcr
