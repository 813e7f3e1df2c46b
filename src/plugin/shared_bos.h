// SPDX-License-Identifier: GPL-2.0-only
//
// The restore's table of the checkpoint's shared BOs (image/render_image.h
// SharedBo: a BO that several files hold, in one or several processes).
//
// One slot per shared BO id, in anonymous shared memory that the restore's
// fabric (plugin/restore_fabric.h) maps in CRIU's main process before CRIU
// forks the restored tasks, so every task sees the same slots. Whichever task restores a holder of a
// shared BO first creates the BO, fills it and puts a dma-buf of it into
// CRIU's fd store (criu::fdstore_add); every other holder, in any task, waits
// until then and imports the BO from the store. Creating a BO never waits
// for another holder, so no order of tasks or files can deadlock; a creator
// that fails marks the slot failed, and its waiters fail at once.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>

#include "base/result.h"
#include "base/unique_fd.h"

namespace amdcr {

// How long a holder waits for another task to create a shared BO.
inline constexpr std::chrono::seconds kSharedBoWait{120};

class SharedBoTable {
	struct Slot;

public:
	// Slots for ids 1..max_id.
	static Result<SharedBoTable> create(uint32_t max_id);
	SharedBoTable(SharedBoTable &&o) noexcept;
	SharedBoTable &operator=(SharedBoTable &&) = delete;
	SharedBoTable(const SharedBoTable &) = delete;
	~SharedBoTable();

	// The creator's right to shared BO `id`: publish() stores its dma-buf
	// for the other holders; destroyed unpublished, it marks the slot
	// failed.
	class Claim {
	public:
		Claim(Claim &&o) noexcept;
		Claim &operator=(Claim &&) = delete;
		Claim(const Claim &) = delete;
		~Claim();
		// Puts a copy of `dmabuf_fd` into CRIU's fd store.
		Status publish(int dmabuf_fd);

	private:
		friend class SharedBoTable;
		Claim(Slot *slot, uint32_t id) : slot_(slot), id_(id) {}
		Slot *slot_ = nullptr;
		uint32_t id_ = 0;
	};

	// Either the claim to create BO `id` (this caller is its first holder)
	// or a dma-buf of the BO another holder created, waited for up to
	// kSharedBoWait.
	struct Taken {
		std::optional<Claim> claim;
		UniqueFd dmabuf;
	};
	Result<Taken> take(uint32_t id);

private:
	SharedBoTable(Slot *slots, size_t bytes, uint32_t max_id)
		: slots_(slots), bytes_(bytes), max_id_(max_id)
	{
	}
	Slot *slots_ = nullptr;
	size_t bytes_ = 0;
	uint32_t max_id_ = 0;
};

} // namespace amdcr
