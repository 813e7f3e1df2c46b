// SPDX-License-Identifier: GPL-2.0-only
//
// The guardian's process (plugin/guardian.h): run_guardian() is all that
// runs in the fork Guardian::start() makes.
#pragma once

#include <sys/types.h>

#include "plugin/guardian.h"

namespace amdcr::guardian {

// The guardian of CRIU's process `criu_pid` (watched through `criu_pidfd`)
// at `stage`, told over channel `chan`; `dir_fd` (-1: none) is the image
// directory. It resets every signal, closes every fd but these (all above
// 2: Guardian::start moved them there) and points 0-2 at /dev/null, names
// itself Guardian::kComm, sends its pid (Kind::Started), then keeps the
// messages until CRIU's process ends (repair, then exit) or the plugin
// says it has finished (exit). Never returns: _exit, so none of CRIU's
// atexit handlers or static destructors run here.
[[noreturn]] void run_guardian(Guardian::Stage stage, int chan, int criu_pidfd, int dir_fd, pid_t criu_pid);

} // namespace amdcr::guardian
