// SPDX-License-Identifier: GPL-2.0-only
//
// The parts of the criu binary's API the plugin uses, found at run time:
// they exist only when CRIU (or the test host) loaded the plugin, and CRIU's
// internal ones (the inventory helpers) may be missing from a given build.
// Lookups only; nothing here holds state.
#pragma once

#include <optional>

namespace amdcr::criu {

// criu_get_image_dir(): a directory fd of the image directory, or nullopt
// outside CRIU.
std::optional<int> image_dir_fd();

// CRIU 4.x internals, when present: record that the images need this
// plugin (dump), and check/consume that record (restore). Return false when
// the running CRIU does not provide them.
bool add_inventory_plugin(const char *name);
// true: the inventory names the plugin (or the API is absent, in which case
// nothing is known and the caller decides by the images).
bool inventory_names_plugin(const char *name);

} // namespace amdcr::criu
