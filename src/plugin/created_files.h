// SPDX-License-Identifier: GPL-2.0-only
//
// CreatedFiles: the image files one dump created, each by its name and the
// inode (st_dev, st_ino) that its commit put under that name, and the file
// of an older checkpoint that its commit replaced, kept under a hidden name
// (ImageDir's commit observer). A failed dump removes exactly its own files
// and puts each kept file back under its name (restore_all), so an older
// checkpoint's files are left byte for byte; a name that now holds another
// inode (a file someone put there since) is left alone, and so is every
// name this dump did not commit, however it is called. A dump that
// succeeded removes the kept files (drop_kept). A dump's file that never
// reached its final name is its AtomicFile's temporary, removed by the
// AtomicFile itself (or by the guardian when CRIU is killed; a killed dump
// leaves the kept files, hidden, beside the files that replaced them).
//
// add() is called from the copy threads (one pages file per GPU) through
// ImageDir's commit observer: it takes a lock. remove_all() runs in the
// hook's thread after every copy has ended.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "image/image_dir.h"

namespace amdcr {

class CreatedFiles {
public:
	// What remove_all() did.
	struct Removal {
		size_t removed = 0;  // ours, unlinked
		size_t replaced = 0; // the name holds another file now: kept
		size_t gone = 0;     // nothing under the name any more
		size_t failed = 0;   // ours, but the unlink failed (logged)
		size_t put_back = 0; // older files this dump had replaced, back under their names
	};

	// File `name` of the image directory is this dump's inode (dev, ino);
	// `kept`: the hidden name of the file it replaced ("": none).
	void add(const std::string &name, dev_t dev, ino_t ino, const std::string &kept = {});
	// From now on `dir`'s commits are recorded here.
	void watch(ImageDir &dir);
	size_t size() const;
	// The names recorded, in the order their commits came.
	std::vector<std::string> names() const;
	// Unlinks each recorded file that is still the inode recorded and puts
	// the file it had replaced back under its name; logs each that fails
	// (prefixed with `why`) and forgets them all.
	Removal remove_all(const ImageDir &dir, const char *why);
	// The dump succeeded: unlinks the kept files (logging each that fails)
	// and forgets them all.
	void drop_kept(const ImageDir &dir);
	void clear();

private:
	struct File {
		std::string name;
		dev_t dev = 0;
		ino_t ino = 0;
		std::string kept;
	};
	// Puts `f.kept` back under `f.name`; false (logged) when it fails.
	static bool put_back(const ImageDir &dir, const File &f, const char *why);
	mutable std::mutex mu_;
	std::vector<File> files_;
};

} // namespace amdcr
