// SPDX-License-Identifier: GPL-2.0-only
//
// What every stage's session is given: the configuration (parsed once at
// init), where the machine's device nodes and sysfs are, and the image
// directory (CRIU's, or a test's).
#pragma once

#include <optional>

#include "config/config.h"
#include "copy/gpu_copy.h"
#include "image/image_dir.h"
#include "copy/staging_gate.h"
#include "device/system.h"

namespace amdcr {

struct SessionEnv {
	Config config;
	SystemPaths paths;
	// The image directory fd (borrowed). Unset: CRIU's, asked for at each
	// use (session_image_dir).
	std::optional<int> image_dir_fd;
	// The loading CRIU calls DUMP_DEVICES_LATE (criu-dev's 15-hook ABI).
	// false (CRIU 4.0-4.2.1): a process's GPU queues are resumed as soon
	// as its /dev/kfd file is dumped.
	bool dump_devices_late = false;
	// The loading CRIU calls POST_FORKING in its main process (CRIU 4.2+,
	// 13 hooks or more): the parallel restore is possible.
	bool post_forking = false;
};

// The image directory of `env`, or an error saying there is none; in
// stream mode (criu --stream, criu::image_streamer) it goes through CRIU's
// image streamer. Ask it
// once per hook, never keep it across hooks: CRIU moves its service fds,
// the image directory's among them, in each restored task
// (criu/servicefd.c clone_service_fd).
Result<ImageDir> session_image_dir(const SessionEnv &env);

// What the copies of one dump or restore share, in every process that takes
// part: the totals of the summary line (summary.h) and the gate through
// which the copies take turns (copy/staging_gate.h). A restore's files are
// restored by the tasks CRIU forks after the plugin's init, and its last
// hook (exit) runs in CRIU's main process: so this is a SharedMemory
// (base/shared_memory.h) made at init, which the tasks inherit and add to,
// and which CRIU's process reads at exit. The restored process does not
// keep it: CRIU's restorer unmaps every mapping that is not in the
// checkpoint. A dump runs in CRIU's process alone and uses the same.
struct SharedCopies {
	CopyTotals totals;
	StagingGate gate;
};

// How the session's copies run (KFD_MAX_BUFFER_SIZE, KFD_SDMA_TIMEOUT):
// their results added to `copies`'s totals, taking turns through its gate
// with the other processes of the dump or restore (`copies` may be nullptr:
// neither). `cancel` (may be nullptr) stops a wait for the gate; the log
// lines go to `deferred` when set (a thread beside CRIU's, base/log.h).
CopySettings copy_settings(const SessionEnv &env, SharedCopies *copies, const std::atomic<bool> *cancel = nullptr,
			   DeferredLog *deferred = nullptr);

} // namespace amdcr
