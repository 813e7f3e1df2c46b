// SPDX-License-Identifier: GPL-2.0-only
#include "shader/dispatch.h"

namespace kfdemu::shader {

class DispatchState {};

Dispatch::Dispatch(std::unique_ptr<DispatchState> s) : s_(std::move(s)) {}
Dispatch::~Dispatch() = default;

std::unique_ptr<Dispatch> Dispatch::start(const Launch &, Memory &, std::string *error)
{
	*error = "shader core: no executor yet";
	return nullptr;
}

Dispatch::Status Dispatch::run(Memory &, uint64_t) { return Status::IllegalInstruction; }
std::string Dispatch::why() const { return "shader core: no executor yet"; }
uint64_t Dispatch::fault_va() const { return 0; }
uint64_t Dispatch::instructions() const { return 0; }
uint64_t Dispatch::lane_ops() const { return 0; }

}  // namespace kfdemu::shader
