// A module's state (parameters and buffers) as one run of bytes: copied from one rank to
// every rank (the same start, buffers kept equal, a restored checkpoint), and compared bit
// for bit across the ranks (the replica check). An optimizer's state, copied from rank 0
// through libtorch's own serialization, so that every state tensor of every optimizer moves.
//
// Cost: a copy is one broadcast of the bytes (docs/algorithms.md); a comparison is one
// broadcast of rank 0's bytes and a gather of one number per rank. The byte buffer is made
// once; the broadcaster of each root when that root is first used (collective: every rank
// copies from the same root at the same time).
#pragma once

#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <gradsync/collective/broadcast.hpp>
#include <gradsync/collective/verify.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/torch/agreement.hpp>

namespace gradsync::torch_binding {

template <communicator Comm>
class module_state {
public:
    static constexpr std::size_t none = std::numeric_limits<std::size_t>::max();

    // The tensors of `lists`, in order; the lists must outlive this.
    module_state(Comm& comm, std::vector<const named_tensors*> lists) : comm_(&comm), lists_(std::move(lists))
    {
        std::size_t total = 0;
        for (const named_tensors* list : lists_)
            for (std::size_t i = 0; i < list->tensors.size(); ++i) {
                const at::Tensor& t = list->tensors[i];
                entries_.push_back({list, i, total, std::size_t(t.numel()) * t.element_size()});
                total += entries_.back().bytes;
            }
        bytes_.resize(total);
        broadcasters_.resize(std::size_t(comm.size()));
    }

    std::size_t bytes() const noexcept { return bytes_.size(); }

    // Every rank's tensors become `root`'s, bit for bit. Collective.
    void copy_from(int root)
    {
        if (comm_->rank() == root)
            pack();
        broadcaster_of(root)(std::span<std::byte>(bytes_));
        if (comm_->rank() != root)
            for (const entry& e : entries_)
                std::memcpy(tensor(e).data_ptr(), bytes_.data() + e.offset, e.bytes);
    }

    // The index of the first tensor whose bytes differ from rank 0's on this rank, or none.
    // Collective.
    std::size_t first_difference()
    {
        if (comm_->rank() == 0)
            pack();
        broadcaster_of(0)(std::span<std::byte>(bytes_));
        for (std::size_t i = 0; i < entries_.size(); ++i)
            if (std::memcmp(tensor(entries_[i]).data_ptr(), bytes_.data() + entries_[i].offset, entries_[i].bytes) != 0)
                return i;
        return none;
    }

    // "parameter 3 (fc1.bias)"
    std::string name(std::size_t i) const { return entries_[i].list->name(entries_[i].index); }

private:
    struct entry {
        const named_tensors* list;
        std::size_t index, offset, bytes;
    };

    const at::Tensor& tensor(const entry& e) const { return e.list->tensors[e.index]; }

    void pack()
    {
        for (const entry& e : entries_)
            std::memcpy(bytes_.data() + e.offset, tensor(e).data_ptr(), e.bytes);
    }

    broadcaster<std::byte, Comm>& broadcaster_of(int root)
    {
        auto& b = broadcasters_[std::size_t(root)];
        if (!b)
            b = std::make_unique<broadcaster<std::byte, Comm>>(*comm_, bytes_.size(), root);
        return *b;
    }

    Comm* comm_;
    std::vector<const named_tensors*> lists_;
    std::vector<entry> entries_;
    std::vector<std::byte> bytes_;
    std::vector<std::unique_ptr<broadcaster<std::byte, Comm>>> broadcasters_;
};

// Rank 0's optimizer state (every tensor of it and the options of every parameter group)
// loaded into every rank's optimizer. Collective; a rank whose optimizer cannot take it (other
// parameter groups, another optimizer) makes it a mismatch_error on every rank.
template <communicator Comm>
void copy_optimizer_state(Comm& comm, torch::optim::Optimizer& optimizer, const std::string& prefix)
{
    std::string bytes;
    if (comm.rank() == 0) {
        torch::serialize::OutputArchive archive;
        optimizer.save(archive);
        std::ostringstream out;
        archive.save_to(out);
        bytes = out.str();
    }
    std::uint64_t length = bytes.size();
    broadcast(comm, std::as_writable_bytes(std::span(&length, 1)), 0);
    bytes.resize(length);
    broadcast(comm, std::as_writable_bytes(std::span(bytes.data(), bytes.size())), 0);
    std::size_t failed = 0;
    std::string why;
    if (comm.rank() != 0) {
        try {
            torch::serialize::InputArchive archive;
            std::istringstream in(bytes);
            archive.load_from(in);
            optimizer.load(archive);
        } catch (const std::exception& e) {
            failed = 1;
            why = e.what();
        }
    }
    const std::vector<std::size_t> ones(std::size_t(comm.size()), 1);
    const auto all = gradsync::detail::gather_all(comm, std::span<const std::size_t>(&failed, 1), ones);
    for (int k = 1; k < comm.size(); ++k)
        if (all[std::size_t(k)].front() != 0)
            throw mismatch_error(prefix + "rank " + std::to_string(k) +
                                 "'s optimizer cannot take rank 0's state" +
                                 (k == comm.rank() ? " (" + why.substr(0, why.find('\n')) + ")" : std::string()) +
                                 ": every rank needs the same optimizer over the same parameters");
}

} // namespace gradsync::torch_binding
