// SPDX-License-Identifier: GPL-2.0-only
//
// The parts of the criu binary's API the plugin uses, found at run time:
// they exist only when CRIU (or the test host) loaded the plugin, and CRIU's
// internal ones (the inventory helpers) may be missing from a given build.
// Lookups only; nothing here holds state.
#pragma once

#include <optional>

#include "image/image_stream.h"

namespace amdcr::criu {

// criu_get_image_dir(): a directory fd of the image directory, or nullopt
// outside CRIU.
std::optional<int> image_dir_fd();

// Stream mode (criu dump/restore --stream): CRIU's img_streamer_open and
// the mode CRIU streams in, or nullopt when CRIU writes plain files.
// CRIU keeps whether it streams in its internal options (`opts.stream`),
// whose layout differs between versions, so the plugin decides by what it
// can observe instead; all three must hold:
//  1. the running criu exports img_streamer_open (every CRIU 4.x does);
//  2. the image directory `image_dir_fd` holds the streamer's socket,
//     streamer-capture.sock (dump) or streamer-serve.sock (restore);
//  3. this process has a connected Unix stream socket whose peer is bound
//     to a socket of that name: the connection CRIU's img_streamer_init
//     made and keeps among its service fds, near the top of the fd limit
//     (the top 65536 fd numbers are searched, only when 2 holds).
// 3 tells which of both sockets is CRIU's, and rules out a socket left
// behind by an earlier streamer: calling img_streamer_open when CRIU does
// not stream would crash CRIU.
std::optional<ImageStreamer> image_streamer(int image_dir_fd);

// CRIU 4.x internals, when present: record that the images need this
// plugin (dump). Returns false when the running CRIU does not provide it.
bool add_inventory_plugin(const char *name);
// Restore: removes the plugin's entry from CRIU's list of plugins the
// inventory requires (CRIU fails the restore with "Missing required
// plugin" for every entry left when all plugins are initialised). true:
// the inventory named the plugin, or it predates plugin lists, or the API
// is absent (then nothing is known and the caller decides by the images).
bool consume_inventory_entry(const char *name);

// CRIU's choice of an fd number the restored task `pid` (its pid in the
// checkpoint) will not use, or nullopt when CRIU does not export
// find_unused_fd_pid or does not know the task.
std::optional<int> unused_fd_of_task(int pid);

// CRIU's fdstore (restore): a socket among the service fds of CRIU's main
// process and of every task it restores, whatever their namespaces, that
// keeps fds by id. fdstore_add: stores a reference to `fd` (the caller
// still owns `fd`) and returns its id; fdstore_get: a new fd of the file
// stored under `id`. nullopt when CRIU does not export them or they fail.
std::optional<int> fdstore_add(int fd);
std::optional<int> fdstore_get(int id);

// The number of plugin hook slots of the CRIU that is loading us, read
// from the size of its exported plugin registry `cr_plugin_ctl` (one list
// head plus one per hook: 12 slots in CRIU 4.0/4.1, 13 in 4.2-4.2.1, 15 in
// criu-dev). nullopt when the loader exports no such registry.
std::optional<unsigned> host_hook_slots();

} // namespace amdcr::criu
