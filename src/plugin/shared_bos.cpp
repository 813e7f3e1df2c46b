// SPDX-License-Identifier: GPL-2.0-only
#include "plugin/shared_bos.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <utility>

#include "plugin/criu_api.h"

namespace amdcr {

// A slot lives in memory shared between processes: only lock-free atomics.
struct SharedBoTable::Slot {
	enum State : uint32_t { kFree = 0, kCreating = 1, kReady = 2, kFailed = 3 };
	std::atomic<uint32_t> state;
	std::atomic<int32_t> store_id; // CRIU fd store id, once kReady
	std::atomic<int32_t> creator;  // pid of the creating task
};
static_assert(std::atomic<uint32_t>::is_always_lock_free && std::atomic<int32_t>::is_always_lock_free,
	      "shared BO slots need lock-free atomics to work across processes");

Result<SharedBoTable> SharedBoTable::create(uint32_t max_id)
{
	// Anonymous memory reads as zero: every slot starts kFree.
	const size_t bytes = (static_cast<size_t>(max_id) + 1) * sizeof(Slot);
	void *p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return errno_error(errno, strprintf("mapping the table of %u shared BOs", max_id));
	return SharedBoTable(static_cast<Slot *>(p), bytes, max_id);
}

SharedBoTable::SharedBoTable(SharedBoTable &&o) noexcept
	: slots_(std::exchange(o.slots_, nullptr)), bytes_(std::exchange(o.bytes_, 0)),
	  max_id_(std::exchange(o.max_id_, 0))
{
}

SharedBoTable::~SharedBoTable()
{
	if (slots_)
		::munmap(slots_, bytes_);
}

SharedBoTable::Claim::Claim(Claim &&o) noexcept
	: slot_(std::exchange(o.slot_, nullptr)), id_(std::exchange(o.id_, 0))
{
}

SharedBoTable::Claim::~Claim()
{
	if (slot_)
		slot_->state.store(Slot::kFailed, std::memory_order_release);
}

Status SharedBoTable::Claim::publish(int dmabuf_fd)
{
	if (!slot_)
		return make_error(EINVAL, "shared BO %u: published twice", id_);
	auto id = criu::fdstore_add(dmabuf_fd);
	if (!id)
		return make_error(ENOTSUP,
				  "shared BO %u: CRIU's fd store (fdstore_add) is missing or failed, so the "
				  "other processes holding the BO cannot get it",
				  id_);
	slot_->store_id.store(*id, std::memory_order_relaxed);
	slot_->state.store(Slot::kReady, std::memory_order_release);
	slot_ = nullptr;
	return ok_status();
}

Result<SharedBoTable::Taken> SharedBoTable::take(uint32_t id)
{
	if (id == 0 || id > max_id_)
		return make_error(EINVAL, "shared BO id %u outside the checkpoint's 1..%u", id, max_id_);
	Slot &slot = slots_[id];
	uint32_t expected = Slot::kFree;
	if (slot.state.compare_exchange_strong(expected, Slot::kCreating, std::memory_order_acq_rel)) {
		slot.creator.store(static_cast<int32_t>(::getpid()), std::memory_order_relaxed);
		Taken t;
		t.claim.emplace(Claim(&slot, id));
		return t;
	}
	const auto deadline = std::chrono::steady_clock::now() + kSharedBoWait;
	for (;;) {
		const uint32_t state = slot.state.load(std::memory_order_acquire);
		if (state == Slot::kReady)
			break;
		if (state == Slot::kFailed)
			return make_error(EIO, "shared BO %u: the task that restored it first failed to create it",
					  id);
		const int32_t creator = slot.creator.load(std::memory_order_relaxed);
		if (creator > 0 && ::kill(creator, 0) != 0 && errno == ESRCH)
			return make_error(ESRCH, "shared BO %u: task %d, which was creating it, is gone", id,
					  creator);
		if (std::chrono::steady_clock::now() > deadline)
			return make_error(ETIMEDOUT, "shared BO %u: task %d did not create it within %lld s", id,
					  creator, static_cast<long long>(kSharedBoWait.count()));
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	const int store_id = slot.store_id.load(std::memory_order_relaxed);
	UniqueFd fd(criu::fdstore_get(store_id).value_or(-1));
	if (!fd.valid())
		return make_error(EIO, "shared BO %u: CRIU's fd store has no entry %d (fdstore_get)", id,
				  store_id);
	Taken t;
	t.dmabuf = std::move(fd);
	return t;
}

} // namespace amdcr
