// SPDX-License-Identifier: GPL-2.0-only
//
// The host's side of CRIU's public plugin API and its log.
//
// CRIU is linked -rdynamic, and plugins call back into it: print_on_level()
// and criu_get_image_dir() (public), add_inventory_plugin(),
// check_and_remove_inventory_plugin(), fdstore_add() and fdstore_get()
// (CRIU internals that the upstream and our amdgpu plugin look up at run
// time). criu-host exports the same six symbols from its executable.
// Their state (log fd and level, image directory fd, the inventory's
// plugin list, the fdstore) is the only process-wide mutable state of the
// host; everything else is passed by reference.
#pragma once

#include <string>
#include <vector>

namespace host {

enum Level : int { kMsg = 0, kError = 1, kWarn = 2, kInfo = 3, kDebug = 4 };

// Log destination and verbosity (CRIU's -v: 1 errors .. 4 debug).
void log_init(int fd, int level);
int log_fd();
int log_level();
// Moves the log fd (e.g. to a high service-fd number).
void log_set_fd(int fd);

// One log line; printf-style. Lines from plugins (print_on_level) and from
// the host share one format: "(SS.UUUUUU) [pid: ]<Tag>text".
void logf(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Errors/warnings with errno appended (": <strerror>").
void log_perror(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// The image directory fd returned to plugins by criu_get_image_dir().
void set_image_dir_fd(int fd);
int image_dir_fd();

// Inventory plugin list (CRIU's add_inventory_plugin() and friends).
void inventory_plugins_reset(std::vector<std::string> names);
void inventory_add_plugin(const std::string &name);
// Names still required: not consumed by check_and_remove_inventory_plugin().
std::vector<std::string> inventory_plugins();
bool inventory_remove_plugin(const std::string &name);

// CRIU's fd store (criu/fdstore.c; plugins look up fdstore_add and
// fdstore_get): a datagram socket connected to itself whose queued
// messages each carry one fd; an fd is read back without dequeuing it by
// peeking at its message (SO_PEEK_OFF). The restore creates it, its socket
// at the fd number `place` returns (a service fd), before the plugins'
// init(RESTORE) as CRIU does, so before it forks the tasks, which inherit
// it and the shared counter; until then both functions fail.
int fdstore_init(int (*place)(int fd, void *ctx), void *ctx);

} // namespace host
