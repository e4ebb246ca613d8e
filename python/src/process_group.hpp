// process_group: gradsync as a torch.distributed backend, a c10d::ProcessGroup over gradsync's
// Gloo transport (docs/python.md).
//
// Construction is torch's rendezvous: the store it hands the backend (a PrefixStore over the
// TCPStore of env:// and torchrun, or a FileStore) carries the Gloo addresses; the timeout given
// to init_process_group is every wait's deadline. Every call is checked on the caller's thread
// (tensors, dtype, op: refused at once, by name) and then queued (work_queue.hpp); on the
// group's thread it runs a collective planned once per shape and kept (collective_cache.hpp),
// so the first call of a shape pays for the plan and its agreement check, and every later one
// runs the plan alone. Calls that differ between ranks meet in the agreement check or in the
// stamps and the position board of gradsync's collectives and end in an error naming both.
// Once a call has failed the ranks are out of step: every later call is refused with the
// first failure's message.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/core/error.hpp>

#include "collective_cache.hpp"
#include "store.hpp"
#include "tensors.hpp"
#include "work_queue.hpp"

namespace gradsync::python {

// Where the group's Gloo device listens: the interface GRADSYNC_SOCKET_IFNAME or, as for torch's
// gloo backend, GLOO_SOCKET_IFNAME names; otherwise this host's name, which the peers resolve.
inline gloo_connect_options connect_options(std::chrono::milliseconds timeout, const std::string& prefix)
{
    gloo_connect_options options;
    options.timeout = timeout;
    options.prefix = prefix;
    options.network_thread_nice = 10; // docs/gloo.md, "Performance": the network thread yields
    for (const char* variable : {"GRADSYNC_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"})
        if (const char* name = std::getenv(variable); name && *name) {
            options.interface = name;
            return options;
        }
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0 && *host)
        options.hostname = host;
    return options;
}

class process_group final : public c10d::ProcessGroup {
public:
    process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout)
        : c10d::ProcessGroup(rank, size), who_("gradsync backend (" + where(rank, size) + ")"),
          comm_(connect(store, rank, size, timeout)), cache_(*comm_)
    {
    }

    const std::string getBackendName() const override { return "gradsync"; }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                             const c10d::AllreduceOptions& options) override
    {
        const at::Tensor& t = one_tensor(who_, "all_reduce", tensors);
        const reduction_key key = reduction_of(who_, "all_reduce", t, options.reduceOp);
        return queue(c10d::OpType::ALLREDUCE, tensors, [this, key, tensors] { cache_.reduction(key).run(tensors); });
    }

    c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                       const c10d::AllreduceCoalescedOptions& options) override
    {
        const reduction_key key = coalesced_reduction_of(who_, "all_reduce_coalesced", tensors, options.reduceOp);
        return queue(c10d::OpType::ALLREDUCE_COALESCED, tensors,
                     [this, key, tensors] { cache_.reduction(key).run(tensors); });
    }

    // The root's result is the allreduce's; the other ranks' tensors end as the root's, which
    // torch leaves unspecified.
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& options) override
    {
        const at::Tensor& t = one_tensor(who_, "reduce", tensors);
        check_root(who_, "reduce", options.rootRank, getSize());
        const reduction_key key = reduction_of(who_, "reduce", t, options.reduceOp);
        return queue(c10d::OpType::REDUCE, tensors, [this, key, tensors] { cache_.reduction(key).run(tensors); });
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                             const c10d::BroadcastOptions& options) override
    {
        const at::Tensor& t = one_tensor(who_, "broadcast", tensors);
        check_root(who_, "broadcast", options.rootRank, getSize());
        const movement_key key{movement::broadcast, bytes_of(t), int(options.rootRank)};
        return queue(c10d::OpType::BROADCAST, tensors, [this, key, t] { cache_.movement(key)(bytes(t)); });
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                             std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) override
    {
        const at::Tensor& in = one_tensor(who_, "all_gather", inputs);
        check_one_list(who_, "all_gather", outputs);
        check_like(who_, "all_gather", outputs[0], in, std::size_t(getSize()));
        const movement_key key{movement::allgather, bytes_of(in), 0, true};
        const std::vector<at::Tensor> out = outputs[0];
        return queue(c10d::OpType::ALLGATHER, out, [this, key, in, out] {
            planned_movement& m = cache_.movement(key);
            std::copy_n(bytes(in).data(), key.bytes, m.staging().data() + std::size_t(getRank()) * key.bytes);
            m(m.staging());
            m.unstage(out);
        });
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                   const c10d::AllgatherOptions&) override
    {
        check_flat(who_, "all_gather_into_tensor", output, input, getSize());
        const movement_key key{movement::allgather, bytes_of(input)};
        return queue(c10d::OpType::_ALLGATHER_BASE, {output}, [this, key, input, output] {
            const std::span<std::byte> all = bytes(output);
            std::copy_n(bytes(input).data(), key.bytes, all.data() + std::size_t(getRank()) * key.bytes);
            cache_.movement(key)(all);
        });
    }

    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                          std::vector<at::Tensor>& inputs, const c10d::GatherOptions& options) override
    {
        const at::Tensor& in = one_tensor(who_, "gather", inputs);
        check_root(who_, "gather", options.rootRank, getSize());
        const int root = int(options.rootRank);
        const bool at_root = getRank() == root;
        if (at_root) {
            check_one_list(who_, "gather", outputs);
            check_like(who_, "gather", outputs[0], in, std::size_t(getSize()));
        } else if (!outputs.empty() && !outputs[0].empty()) {
            throw usage_error(who_ + ": gather: only the root (rank " + std::to_string(root) + ") gives a gather_list");
        }
        const movement_key key{movement::gather, bytes_of(in), root, true};
        const std::vector<at::Tensor> out = at_root ? outputs[0] : std::vector<at::Tensor>{};
        return queue(c10d::OpType::GATHER, out, [this, key, in, out, at_root] {
            planned_movement& m = cache_.movement(key);
            if (!at_root)
                return m(bytes(in));
            std::copy_n(bytes(in).data(), key.bytes, m.staging().data() + std::size_t(key.root) * key.bytes);
            m(m.staging());
            m.unstage(out);
        });
    }

    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                           const c10d::ScatterOptions& options) override
    {
        const at::Tensor& out = one_tensor(who_, "scatter", outputs);
        check_root(who_, "scatter", options.rootRank, getSize());
        const int root = int(options.rootRank);
        const bool at_root = getRank() == root;
        if (at_root) {
            check_one_list(who_, "scatter", inputs);
            check_like(who_, "scatter", inputs[0], out, std::size_t(getSize()));
        } else if (!inputs.empty() && !inputs[0].empty()) {
            throw usage_error(who_ + ": scatter: only the root (rank " + std::to_string(root) + ") gives a scatter_list");
        }
        const movement_key key{movement::scatter, bytes_of(out), root, true};
        const std::vector<at::Tensor> in = at_root ? inputs[0] : std::vector<at::Tensor>{};
        return queue(c10d::OpType::SCATTER, outputs, [this, key, in, out, at_root] {
            planned_movement& m = cache_.movement(key);
            if (!at_root)
                return m(bytes(out));
            m.stage(in);
            m(m.staging());
            std::copy_n(m.staging().data() + std::size_t(key.root) * key.bytes, key.bytes, bytes(out).data());
        });
    }

    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                            const c10d::AllToAllOptions&) override
    {
        if (inputs.empty())
            throw usage_error(who_ + ": all_to_all: no input tensors");
        check_like(who_, "all_to_all", inputs, inputs[0], std::size_t(getSize()));
        check_like(who_, "all_to_all", outputs, inputs[0], std::size_t(getSize()));
        const movement_key key{movement::all_to_all, bytes_of(inputs[0]), 0, true};
        return queue(c10d::OpType::ALLTOALL, outputs, [this, key, inputs, outputs] {
            planned_movement& m = cache_.movement(key);
            m.stage(inputs);
            m(m.staging());
            m.unstage(outputs);
        });
    }

    // Equal splits only: the exchanger's blocks are of one size.
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                                 std::vector<int64_t>& output_splits,
                                                 std::vector<int64_t>& input_splits,
                                                 const c10d::AllToAllOptions&) override
    {
        check_tensor(who_, "all_to_all_single", input);
        check_tensor(who_, "all_to_all_single", output);
        if (!output_splits.empty() || !input_splits.empty())
            throw usage_error(who_ + ": all_to_all_single: uneven splits are not supported by the gradsync backend; "
                                     "give none (equal blocks) (docs/python.md, \"Limits\")");
        if (input.scalar_type() != output.scalar_type() || input.numel() != output.numel() ||
            input.numel() % getSize() != 0)
            throw usage_error(who_ + ": all_to_all_single: input " + described(input) + " and output " +
                              described(output) + " must have one dtype and one size, a multiple of the " +
                              std::to_string(getSize()) + " ranks");
        const movement_key key{movement::all_to_all, bytes_of(input) / std::size_t(getSize())};
        return queue(c10d::OpType::ALLTOALL_BASE, {output}, [this, key, input, output] {
            const std::span<std::byte> all = bytes(output);
            if (all.data() != bytes(input).data())
                std::copy_n(bytes(input).data(), all.size(), all.data());
            cache_.movement(key)(all);
        });
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                  std::vector<std::vector<at::Tensor>>& inputs,
                                                  const c10d::ReduceScatterOptions& options) override
    {
        const at::Tensor& out = one_tensor(who_, "reduce_scatter", outputs);
        check_one_list(who_, "reduce_scatter", inputs);
        check_like(who_, "reduce_scatter", inputs[0], out, std::size_t(getSize()));
        reduction_key key = coalesced_reduction_of(who_, "reduce_scatter", inputs[0], options.reduceOp);
        const std::vector<at::Tensor> in = inputs[0];
        return queue(c10d::OpType::REDUCE_SCATTER, outputs, [this, key, in, out] {
            cache_.reduction(key).run_into(in, out, std::size_t(getRank()));
        });
    }

    c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                        const c10d::ReduceScatterOptions& options) override
    {
        check_flat(who_, "reduce_scatter_tensor", input, output, getSize());
        const std::vector<at::Tensor> blocks = input.chunk(getSize());
        reduction_key key = coalesced_reduction_of(who_, "reduce_scatter_tensor", blocks, options.reduceOp);
        return queue(c10d::OpType::_REDUCE_SCATTER_BASE, {output}, [this, key, blocks, output] {
            cache_.reduction(key).run_into(blocks, output, std::size_t(getRank()));
        });
    }

    // Adasum of a bucket whose layers (parameters) hold the given element counts: the DDP
    // hook's reduction (gradsync/torch/hooks.py).
    c10::intrusive_ptr<c10d::Work> allreduce_adasum(const at::Tensor& t, const std::vector<std::size_t>& layers)
    {
        check_tensor(who_, "allreduce_adasum", t);
        reduction_key key{t.scalar_type(), reduction_op::adasum, layers};
        if (!floating(key.dtype))
            throw usage_error(who_ + ": allreduce_adasum: Adasum is defined for floating dtypes only, not " +
                              c10::toString(key.dtype));
        std::size_t total = 0;
        for (std::size_t n : layers)
            total += n;
        if (total != std::size_t(t.numel()))
            throw usage_error(who_ + ": allreduce_adasum: the layers hold " + std::to_string(total) +
                              " elements, the tensor " + std::to_string(t.numel()));
        std::vector<at::Tensor> tensors{t};
        return queue(c10d::OpType::ALLREDUCE, tensors, [this, key, tensors] { cache_.reduction(key).run(tensors); });
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int peer, int tag) override
    {
        check_message(who_, "send", tensors, peer, tag, getRank(), getSize());
        return queue_message(c10d::OpType::SEND, tensors[0], peer, tag);
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int peer, int tag) override
    {
        check_message(who_, "recv", tensors, peer, tag, getRank(), getSize());
        return queue_message(c10d::OpType::RECV, tensors[0], peer, tag);
    }

    c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>&, int) override
    {
        throw usage_error(who_ + ": recv from any source is not supported by the gradsync backend: name the source "
                                 "rank (docs/python.md, \"Limits\")");
    }

    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override
    {
        return queue(c10d::OpType::BARRIER, {}, [this] { cache_.barrier(); });
    }

private:
    static std::unique_ptr<gloo_communicator> connect(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                      std::chrono::milliseconds timeout)
    {
        gloo_store rendezvous(store);
        gloo_options options;
        options.deadline = timeout;
        options.eager_bytes = std::size_t(64) << 10; // docs/gloo.md: every rank the same
        return std::make_unique<gloo_communicator>(
            gloo_connect(rendezvous, rank, size, connect_options(timeout, "gradsync")), options);
    }

    // Queues call; once one has failed, every later one fails with its message.
    template <class Call>
    c10::intrusive_ptr<c10d::Work> queue(c10d::OpType type, std::vector<at::Tensor> outputs, Call call)
    {
        return queue_.push(type, std::move(outputs), [this, call = std::move(call)] {
            remembered([&] { call(); });
            return work_queue::rest();
        });
    }

    // Queues a send or receive: posted in order, waited for once the calls after it are posted
    // (work_queue.hpp).
    c10::intrusive_ptr<c10d::Work> queue_message(c10d::OpType type, const at::Tensor& t, int peer, int tag)
    {
        return queue_.push(
            type, {t},
            [this, type, t, peer, tag] {
                auto request = std::make_shared<gloo_communicator::request>();
                remembered([&] {
                    *request = type == c10d::OpType::SEND ? comm_->isend(bytes(t), peer, tag)
                                                          : comm_->irecv(bytes(t), peer, tag);
                });
                return work_queue::rest([this, request] { remembered([&] { comm_->wait(*request); }); });
            },
            true);
    }

    // Runs step unless a call failed before; a step that fails is remembered as the failure.
    template <class Step>
    void remembered(Step step)
    {
        if (!failed_.empty())
            throw usage_error(who_ + ": refused: an earlier call failed, so the ranks are out of step (" + failed_ + ")");
        try {
            step();
        } catch (const std::exception& e) {
            failed_ = e.what();
            if (!names_notice(failed_))
                throw;
            failed_ += " (reducer #" + std::to_string(cache_.notice_identity()) +
                " is the backend's notice that a rank builds a collective for a call it has not made before: "
                "the ranks' calls differ in kind, size, dtype, op or root)";
            throw mismatch_error(failed_);
        }
    }

    // Whether an error names the notice (collective_cache.hpp) as "#<identity>".
    bool names_notice(const std::string& message) const
    {
        const std::string id = "#" + std::to_string(cache_.notice_identity());
        for (auto at = message.find(id); at != std::string::npos; at = message.find(id, at + 1)) {
            const std::size_t end = at + id.size();
            if (end == message.size() || message[end] < '0' || message[end] > '9')
                return true;
        }
        return false;
    }

    std::string who_;
    std::unique_ptr<gloo_communicator> comm_;
    collective_cache cache_;
    std::string failed_; // the group's thread's alone
    work_queue queue_;   // last: its thread ends before the members above go
};

} // namespace gradsync::python
