// SPDX-License-Identifier: GPL-2.0-only
//
// The daemon side of the transport: owns the connection to the Model,
// serves the shim's requests (one thread per client connection, one
// connection per client thread), implements Caller for each call and
// ProcessMemory for asynchronous engines, and tells the model about file
// releases (inotify IN_CLOSE_* on each device file's backing inode fires
// when a client open file description is finally released) and process
// exits (pidfd).
#pragma once

#include "../model/interface.h"

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace kfdemu {

namespace wire {
struct Request;
}
class CallerImpl;

// process_vm_readv/writev on any client process.
class ProcMemory final : public ProcessMemory {
public:
	int read(pid_t tgid, uint64_t addr, void *dst, size_t len) override;
	int write(pid_t tgid, uint64_t addr, const void *src, size_t len) override;
	bool vma_of(pid_t tgid, uint64_t addr, uint64_t *start, uint64_t *end) override; // /proc/<pid>/maps
};

// /proc facts about a process, as the kernel would know them.
// Whether thread `tracer_tid` of process `tracer_tgid` ptraces the leader
// thread of `pid` (the exact thread, as KFD requires).
bool proc_is_tracer_of(pid_t tracer_tgid, pid_t tracer_tid, pid_t pid);
bool proc_has_cr_capability(pid_t tid);

class Daemon {
public:
	// Binds and listens on `socket_path`; check error() afterwards.
	Daemon(Model &model, std::string socket_path);
	~Daemon();
	Daemon(const Daemon &) = delete;
	Daemon &operator=(const Daemon &) = delete;

	const std::string &error() const { return error_; }

	// Starts the accept and watcher threads.
	void start();
	// Stops accepting; connection threads still blocked in the model are
	// left to the process exit.
	void stop();

	// A model fd the per-call Caller is to install in a client. The
	// client's description is opened only when the reply is sent, in
	// batches of wire::kMaxFdsPerMsg, so a reply with one fd per BO (CRIU
	// CHECKPOINT/RESTORE of 16384 BOs) costs the daemon at most one batch
	// of fds beyond the model's own one per BO. Meanwhile the reservation
	// counts as a description of the file, so the model cannot release it
	// (and close `model_fd`) before the client has its fd.
	struct Reservation {
		int model_fd = -1;
		int access = -1;	// as for open_reserved
		int wd = -1;		// inotify watch counted, -1: none
		FileKey key{};
	};
	// Counts a description of `model_fd`'s file ahead of open_reserved.
	// -errno when the file cannot be stat'ed. `access`: O_RDONLY/O_WRONLY/
	// O_RDWR of the client's open (device opens), or -1 (model-made
	// files: dma-bufs are read-write).
	int reserve_client_fd(int model_fd, int access, Reservation *out);
	// The client-side description of a reservation: a new open file
	// description of the same inode (its final release is what inotify
	// reports), or, where the file cannot be reopened, a dup whose
	// release the model learns of by its own means (the reservation is
	// dropped without a release). -errno on failure (the reservation is
	// then still held: drop it).
	int open_reserved(Reservation &r);
	// Undoes a reservation that will not be delivered: the last one of a
	// file releases it in the model, as the close of its last
	// description would. Not with the model's lock held.
	void drop_reserved(Reservation &r);

	// "vmas <pid>" and friends handled by the transport itself; nullopt
	// when the query is the model's.
	std::optional<std::string> introspect_local(std::string_view query);

	Model &model() { return model_; }

private:
	struct Vma {
		uint64_t end;
		std::string path;
		uint64_t pgoff;
		int prot;
		uint64_t ino;	// inode of the file actually mapped (0: unknown)
	};
	struct PidWatch {
		int fd;		// pidfd
		uint64_t token;	// its epoll data (> every fd number)
	};
	struct Watch {
		FileKey key;
		unsigned descriptions = 0;
	};

	void accept_loop();
	// A client connection's thread: its requests, one at a time, until
	// it closes.
	void serve(int conn, pid_t tgid);
	// The next request and its payload; false when the connection ends.
	// The connection is marked busy once a request is there.
	bool read_request(int conn, wire::Request *rq, std::string *payload);
	// A call in progress on `conn` (for Op::Settle); false: its reply
	// is written.
	void set_busy(int conn, bool busy);
	// Before an ioctl made at `made_ns` (its request read from `conn`)
	// goes into the model: waits until no call its process made earlier
	// is still to go in: none read from another of its connections and
	// not yet entered (Conn::made_ns), none being read (Conn::reading)
	// and none unread (FIONREAD) on one not serving a call; the earliest
	// goes first (equal times: the lower fd). A kernel ioctl runs in its
	// thread as it is made; the daemon's threads, one per connection,
	// can be scheduled in any order on a loaded machine, and a later call
	// served first breaks what the kernel guarantees, e.g. a WAIT_EVENTS
	// made before another thread's SET_EVENT is woken by it. Calls of
	// other processes are not waited for. Gives up after kOrderWaitMs
	// (counted: "order_waits_expired"): a call whose connection is not
	// accepted yet, or a thread that never finishes sending, is not
	// waited for longer.
	void await_turn(int conn, uint64_t made_ns);
	static constexpr unsigned kOrderWaitMs = 5000;
	// The call read from `conn` has entered the model (Caller::entered),
	// or ended without: later calls may go in.
	void entered(int conn);
	// ",\"order_waits\":N,\"order_waits_expired\":M" for "transport".
	std::string order_counters();

	// The request being served and its reply (daemon.cpp).
	struct Call;
	// The handler of each kind of message (wire::Op).
	void dispatch(Call &call);
	void on_open(Call &call);
	void on_ioctl(Call &call);
	void on_mmap(Call &call);
	void on_vma_add(Call &call);
	void on_describe(Call &call);
	void on_introspect(Call &call);
	void on_set_faults(Call &call);
	// Sends the reply with the fds it installs; nonzero when the
	// connection is to end.
	struct ReplyFds;
	int send_reply(int conn, Call &call);
	// Op::Settle: 0, -ETIMEDOUT (a call still in progress after
	// timeout_ms) or -ENOENT (no connection has, or had during the
	// call, that client inode).
	int64_t settle(uint32_t client_ino, uint64_t timeout_ms);
	void watch_loop();
	void track_process(pid_t tgid);
	// Drops a process's pidfd and records (mu_ held); the caller tells
	// the model.
	void forget_process_locked(pid_t tgid);
	void check_image(pid_t tgid, uint32_t image, bool fresh_image);
	void vma_add(pid_t tgid, uint64_t start, uint64_t len, std::string path, uint64_t pgoff, int prot,
		     uint64_t ino);
	void vma_remove(pid_t tgid, uint64_t start, uint64_t len);

	Model &model_;
	std::string path_, error_;
	int listen_fd_ = -1, inotify_fd_ = -1, epoll_fd_ = -1, stop_fd_ = -1;
	std::atomic<bool> stopping_{false};
	std::thread accept_thread_, watch_thread_;

	// Held across "drop a pid's records, then Model::process_exit" (the
	// watcher, track_process): a connection from a reused pid is tracked
	// only once the old process's exit has reached the model.
	std::mutex exit_mu_;
	// Each client connection (daemon-side fd) while it is served: its
	// process, the inode of the client's end (from its requests) and
	// whether a call is in progress (read, reply not yet written).
	//
	// Entry order (await_turn): `reading` from the first byte of a
	// request until all of it is read; `made_ns` the time an ioctl read
	// from it was made (wire::Request::made_ns) until it enters the
	// model, else 0.
	struct Conn {
		pid_t tgid;
		uint32_t client_ino = 0;
		bool busy = false;
		bool reading = false;
		uint64_t made_ns = 0;
	};
	std::mutex conns_mu_;
	std::condition_variable conns_cv_;
	std::map<int, Conn> conns_;
	// Whether a call of connection `fd` (not `self`, of process `tgid`)
	// made before `made_ns` may still be to go in (conns_mu_ held).
	static bool earlier_call_pending(int self, pid_t tgid, uint64_t made_ns, int fd, const Conn &c);
	std::mutex mu_;
	std::map<int, Watch> watches_;			// inotify wd -> file
	std::map<pid_t, PidWatch> pidfds_;		// tracked processes
	uint64_t next_token_ = uint64_t(1) << 32;
	std::map<pid_t, uint32_t> images_;		// tgid -> program image (exec detection)
	std::map<pid_t, std::map<uint64_t, Vma>> vmas_;	// tgid -> start -> vma
	uint64_t releases_ = 0, exits_ = 0, installs_ = 0, connections_ = 0, execs_ = 0,
		 restored_images_ = 0;
	// await_turn: ioctls that waited for one made earlier, and waits
	// that expired (conns_mu_).
	uint64_t order_waits_ = 0, order_waits_expired_ = 0;

	friend class CallerImpl;
};

} // namespace kfdemu
