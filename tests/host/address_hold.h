// SPDX-License-Identifier: GPL-2.0-only
//
// The address ranges of the dumped tasks' device mappings, kept free in the
// restoring host. CRIU's restorer unmaps all of its own memory before it
// maps a task's; the host cannot, so its own mappings (libraries, plugins,
// their staging buffers, the emulator's) could sit where a dumped mapping
// must go, and the restore would fail at random ("Can't map ... File
// exists"). The host therefore holds those ranges (PROT_NONE, no memory
// reserved) from right after reading the inventory, before it loads any
// plugin; forked tasks inherit the hold, and each task maps its own device
// mappings over it and gives back the rest.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "base/result.h"
#include "inventory.h"

namespace host {

class AddressHold {
public:
	AddressHold() = default;
	AddressHold(AddressHold &&o) noexcept : ranges_(std::exchange(o.ranges_, {})) {}
	AddressHold &operator=(AddressHold &&o) noexcept;
	AddressHold(const AddressHold &) = delete;
	AddressHold &operator=(const AddressHold &) = delete;
	~AddressHold() { release(); }

	// Holds the union of every task's mapping ranges. Fails with EEXIST,
	// naming the range, when the host itself already maps part of one
	// (nothing is held then).
	static amdcr::Result<AddressHold> take(const Inventory &inv);

	// Whether [start, end) lies inside one held range.
	bool holds(uint64_t start, uint64_t end) const;
	// In a task: gives back every held byte outside `own`, the task's own
	// mappings, which it then maps over the hold.
	void keep_only(const std::vector<VmaRecord> &own);

private:
	void release();
	std::vector<std::pair<uint64_t, uint64_t>> ranges_; // sorted, disjoint
};

} // namespace host
