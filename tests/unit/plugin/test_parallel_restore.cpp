// SPDX-License-Identifier: GPL-2.0-only
//
// The parallel restore's channel (plugin/parallel_restore.h) without a
// device: a forked child plays the restored task and hands over memfds as
// its "dma-bufs"; this process plays CRIU's main process. The copy
// function records what arrives (and reads each fd to prove it is the
// child's file, in order).
//
// This program exports fdstore_add/fdstore_get (ENABLE_EXPORTS), found by
// the plugin's CRIU API lookup as CRIU's own would be: stored fds are kept
// open here and inherited by the forked child, as CRIU's fdstore socket is.
#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "plugin/parallel_restore.h"

using namespace amdcr;

namespace {

std::vector<int> stored;

} // namespace

extern "C" __attribute__((visibility("default"))) int fdstore_add(int fd)
{
	const int kept = fcntl(fd, F_DUPFD_CLOEXEC, 100);
	if (kept < 0)
		return -1;
	stored.push_back(kept);
	return static_cast<int>(stored.size() - 1);
}

extern "C" __attribute__((visibility("default"))) int fdstore_get(int id)
{
	if (id < 0 || static_cast<size_t>(id) >= stored.size())
		return -1;
	return fcntl(stored[static_cast<size_t>(id)], F_DUPFD_CLOEXEC, 0);
}

namespace {

// What the copy function saw of one hand-over.
struct Seen {
	HandOverKind kind;
	int file_id;
	pid_t pid;
	std::vector<uint32_t> values; // each fd's first 4 bytes
};

struct Recorder {
	std::mutex lock;
	std::vector<Seen> seen;
	int fail_file = -1; // the copy of this file fails

	ParallelRestore::CopyFn fn()
	{
		return [this](const HandOver &h, const std::atomic<bool> &, DeferredLog &log) -> Status {
			log_msg_to(&log, LogLevel::Info, "copied file %d", h.file_id);
			Seen s{h.kind, h.file_id, h.pid, {}};
			for (const auto &fd : h.dmabufs) {
				uint32_t v = 0;
				if (pread(fd.get(), &v, sizeof(v), 0) != sizeof(v))
					return make_error(EIO, "fd %d unreadable", fd.get());
				s.values.push_back(v);
			}
			std::lock_guard<std::mutex> g(lock);
			seen.push_back(std::move(s));
			if (h.file_id == fail_file)
				return make_error(EIO, "injected copy failure");
			return ok_status();
		};
	}
};

// `n` memfds holding base, base + 1, ...
std::vector<UniqueFd> buffers(size_t n, uint32_t base)
{
	std::vector<UniqueFd> v;
	for (size_t i = 0; i < n; i++) {
		UniqueFd fd(memfd_create("buf", MFD_CLOEXEC));
		cr_assert(fd.valid());
		const uint32_t value = base + static_cast<uint32_t>(i);
		cr_assert_eq(pwrite(fd.get(), &value, sizeof(value), 0), static_cast<ssize_t>(sizeof(value)));
		v.push_back(std::move(fd));
	}
	return v;
}

struct Send {
	HandOverKind kind;
	int file_id;
	size_t count;
	uint32_t base;
};

// Forks a "task" that hands over each of `sends`; returns its pid after
// it has exited with 0 (all sent).
pid_t task_hands_over(const ParallelRestore &p, const std::vector<Send> &sends)
{
	const pid_t pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		for (const Send &s : sends) {
			auto fds = buffers(s.count, s.base);
			std::vector<int> raw;
			for (const auto &f : fds)
				raw.push_back(f.get());
			if (!p.hand_over(s.kind, s.file_id, raw))
				_exit(1);
		}
		_exit(0);
	}
	int status = 0;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the task failed to hand over");
	return pid;
}

std::vector<uint32_t> sequence(size_t n, uint32_t base)
{
	std::vector<uint32_t> v;
	for (size_t i = 0; i < n; i++)
		v.push_back(base + static_cast<uint32_t>(i));
	return v;
}

} // namespace

Test(parallel_restore, a_task_s_buffers_reach_the_thread_in_order_across_messages)
{
	Recorder rec;
	auto p = ParallelRestore::create(rec.fn());
	cr_assert(p.ok(), "%s", p.ok() ? "" : p.error().message().c_str());
	cr_assert((*p)->start().ok());
	// 300 buffers: two messages (at most 253 fds each).
	const pid_t task = task_hands_over(**p, {{HandOverKind::Kfd, 7, 300, 1000},
					       {HandOverKind::Render, 9, 2, 50}});
	std::vector<pid_t> senders;
	auto st = (*p)->finish(&senders);
	cr_assert(st.ok(), "%s", st.ok() ? "" : st.error().message().c_str());
	cr_assert_eq(senders.size(), 1u);
	cr_assert_eq(senders[0], task);
	cr_assert_eq(rec.seen.size(), 2u);
	cr_assert(rec.seen[0].kind == HandOverKind::Kfd);
	cr_assert_eq(rec.seen[0].file_id, 7);
	cr_assert_eq(rec.seen[0].pid, task);
	cr_assert(rec.seen[0].values == sequence(300, 1000));
	cr_assert(rec.seen[1].kind == HandOverKind::Render);
	cr_assert_eq(rec.seen[1].file_id, 9);
	cr_assert(rec.seen[1].values == sequence(2, 50));
	// Later calls return the same outcome.
	cr_assert((*p)->finish(nullptr).ok());
}

Test(parallel_restore, a_failed_copy_is_the_outcome_and_stops_further_copies)
{
	Recorder rec;
	rec.fail_file = 1;
	auto p = ParallelRestore::create(rec.fn());
	cr_assert(p.ok());
	cr_assert((*p)->start().ok());
	const pid_t task = task_hands_over(**p, {{HandOverKind::Kfd, 1, 3, 0}, {HandOverKind::Kfd, 2, 3, 0}});
	auto st = (*p)->finish(nullptr);
	cr_assert_not(st.ok());
	const std::string want = "parallel restore of task " + std::to_string(task) + ", KFD file 1: injected";
	cr_assert(st.error().message().find(want) != std::string::npos, "%s", st.error().message().c_str());
	cr_assert_eq(rec.seen.size(), 1u, "file 2 was copied after file 1 failed");
	cr_assert_not((*p)->finish(nullptr).ok());
}

Test(parallel_restore, without_post_forking_finish_copies_what_was_handed_over)
{
	Recorder rec;
	auto p = ParallelRestore::create(rec.fn());
	cr_assert(p.ok());
	task_hands_over(**p, {{HandOverKind::Kfd, 4, 5, 10}});
	cr_assert(rec.seen.empty());
	cr_assert((*p)->finish(nullptr).ok());
	cr_assert_eq(rec.seen.size(), 1u);
	cr_assert(rec.seen[0].values == sequence(5, 10));
}

Test(parallel_restore, a_running_thread_is_stopped_when_the_restore_ends_early)
{
	Recorder rec;
	auto p = ParallelRestore::create(rec.fn());
	cr_assert(p.ok());
	cr_assert((*p)->start().ok());
	p->reset(); // joins; must not hang
	cr_assert(rec.seen.empty());
}
