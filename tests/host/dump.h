// SPDX-License-Identifier: GPL-2.0-only
#pragma once

#include <sys/types.h>

#include "plugins.h"

namespace host {

struct DumpOptions {
	pid_t pid = 0;
	bool kill = false; // --kill: kill the tasks after a successful dump
	bool pre_dump = false; // CRIU's pre-dump: PAUSE_DEVICES and the freeze only
};

// The dump of the tree rooted at opts.pid with the loaded plugins (their
// init(DUMP), or init(PRE_DUMP) for a pre-dump, already done). Calls
// exit(stage, ret) itself. 0 on success.
int run_dump(const DumpOptions &opts, PluginSet &plugins, int dirfd);

} // namespace host
