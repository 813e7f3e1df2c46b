// SPDX-License-Identifier: GPL-2.0-only
#pragma once

#include <string>
#include <vector>

#include "address_hold.h"
#include "inventory.h"
#include "plugins.h"

namespace host {

// How the tasks restore their files: all at once (as CRIU's tasks do), or
// one task after the other in the inventory's order (parent first) or its
// reverse, each task's files and mappings done before the next task
// starts. The serial orders fix which task restores a file first; they
// hang when a task needs a file another task restores later.
enum class RestoreOrder { Concurrent, Tree, Reverse };

struct RestoreOptions {
	RestoreOrder order = RestoreOrder::Concurrent;
	std::string verifier_lib; // empty: no verifier
	std::string verifier_fn;
	std::string verifier_arg;
	// fds the host inherited when it started: replacing one of these with a
	// restored fd is expected (CRIU closes them all); replacing any other
	// (a plugin's) is worth a warning.
	std::vector<int> inherited_fds;
	// The tasks' mapping ranges, held since before the plugins were
	// loaded (null: nothing held, each mapping must find its range free).
	AddressHold *hold = nullptr;
};

// The restore of `inv` with the loaded plugins (their init(RESTORE) done
// and the inventory's plugin list checked). Calls exit(RESTORE, ret)
// itself. 0 when the restore and every task's verifier succeeded.
int run_restore(const RestoreOptions &opts, PluginSet &plugins, const Inventory &inv);

} // namespace host
