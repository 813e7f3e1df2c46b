// SPDX-License-Identifier: GPL-2.0-only
#include "image/pages_series.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>

namespace amdcr {

Status PagesSeriesWriter::open_next()
{
	const PagesPart &p = parts_[next_++];
	auto w = PagesWriter::create(*dir_, p.name, p.size, seal_);
	if (!w)
		return std::move(w).error();
	cur_.emplace(std::move(*w));
	return ok_status();
}

Status PagesSeriesWriter::write(const void *buf, size_t len)
{
	const auto *p = static_cast<const uint8_t *>(buf);
	while (len > 0) {
		if (!cur_ || cur_->remaining() == 0) {
			if (cur_) {
				if (auto st = cur_->commit(); !st)
					return st;
				cur_.reset();
			}
			if (next_ == parts_.size())
				return make_error(EINVAL, "%zu bytes past the last of %zu pages files", len,
						  parts_.size());
			if (auto st = open_next(); !st)
				return st;
			continue;
		}
		const size_t n = static_cast<size_t>(std::min<uint64_t>(len, cur_->remaining()));
		if (auto st = cur_->write(p, n); !st)
			return st;
		p += n;
		len -= n;
	}
	return ok_status();
}

Status PagesSeriesWriter::finish()
{
	for (;;) {
		if (cur_) {
			if (cur_->remaining() != 0)
				return make_error(EIO, "%s: %" PRIu64 " of %" PRIu64 " bytes written",
						  cur_->name().c_str(), cur_->written(), cur_->payload_size());
			if (auto st = cur_->commit(); !st)
				return st;
			cur_.reset();
		}
		if (next_ == parts_.size())
			return ok_status();
		if (parts_[next_].size != 0)
			return make_error(EIO, "%s: not written (%" PRIu64 " bytes expected)",
					  parts_[next_].name.c_str(), parts_[next_].size);
		if (auto st = open_next(); !st)
			return st;
	}
}

PagesSeriesReader::PagesSeriesReader(const ImageDir &dir, std::vector<PagesPart> parts, std::optional<DumpId> seal)
	: dir_(&dir), parts_(std::move(parts)), seal_(seal)
{
	for (const auto &p : parts_)
		remaining_ += p.size;
}

Status PagesSeriesReader::advance()
{
	while (!cur_ || cur_->remaining() == 0) {
		cur_.reset();
		if (next_ == parts_.size())
			return make_error(EINVAL, "read past the last of %zu pages files", parts_.size());
		const PagesPart &p = parts_[next_++];
		auto r = PagesReader::open(*dir_, p.name, seal_);
		if (!r)
			return std::move(r).error();
		if (r->payload_size() != p.size)
			return make_error(EINVAL, "%s: holds %" PRIu64 " bytes, its BO has %" PRIu64,
					  p.name.c_str(), r->payload_size(), p.size);
		cur_.emplace(std::move(*r));
	}
	return ok_status();
}

Status PagesSeriesReader::read(void *buf, size_t len)
{
	auto *p = static_cast<uint8_t *>(buf);
	if (len > remaining_)
		return make_error(EINVAL, "pages files: %zu bytes asked, %" PRIu64 " left", len, remaining_);
	while (len > 0) {
		if (auto st = advance(); !st)
			return st;
		const size_t n = static_cast<size_t>(std::min<uint64_t>(len, cur_->remaining()));
		if (auto st = cur_->read(p, n); !st)
			return st;
		p += n;
		len -= n;
		remaining_ -= n;
	}
	return ok_status();
}

Status PagesSeriesReader::skip(uint64_t len)
{
	if (len > remaining_)
		return make_error(EINVAL, "pages files: skip of %" PRIu64 " bytes, %" PRIu64 " left", len,
				  remaining_);
	while (len > 0) {
		if (auto st = advance(); !st)
			return st;
		const uint64_t n = std::min<uint64_t>(len, cur_->remaining());
		if (auto st = cur_->skip(n); !st)
			return st;
		len -= n;
		remaining_ -= n;
	}
	return ok_status();
}

} // namespace amdcr
