// nccl_communicator: the communicator concept over NCCL point-to-point (ncclSend/ncclRecv on
// one CUDA stream).
//
//   gradsync::nccl_communicator comm(nccl_comm, stream);   // non-owning
//   gradsync::allreduce(comm, gradsync::device_span<float>(grad, n, stream), gradsync::average{},
//                       gradsync::ring{});                  // device plan, messages via NCCL
//
// Messages: the sends and receives posted between two waits form one NCCL group
// (ncclGroupStart at the first post, ncclGroupEnd at the next wait), which NCCL runs as a
// unit, so the exchanges of the device plans (all of a step's messages posted, then waited)
// and of the agreement check cannot deadlock. A request is that group's CUDA event; wait()
// polls it and ncclCommGetAsyncError, so a failed peer ends in a communication_error instead
// of a hang (abort the NCCL communicator afterwards: its kernels may still be stuck). With
// nccl_options::deadline, a wait longer than it throws deadline_error, and release() ends
// every wait in aborted_error; then too, ncclCommAbort the NCCL communicator.
// Device (and managed) memory is sent directly; host memory (the agreement check's small
// messages) goes through a stream-ordered device copy. ncclAllReduce itself is the
// nccl_passthrough algorithm (algorithm/nccl_passthrough.hpp).
//
// Limits, NCCL's: tags are ignored (messages between two ranks match in posting order, which
// one reducer at a time satisfies; concurrent reducers need their own NCCL communicators); a
// receive of another size than its send is not detected (the reducer's agreement check rules
// it out); host algorithms, which keep a window of receives and wait on them one by one, can
// deadlock under grouping, so the device reducer runs only device plans here
// (runs_host_algorithms = false): every policy and algorithm (the device plans post all of a
// step's receives before waiting, docs/gpu.md) and nccl_passthrough. Hierarchical needs its
// ranks_per_node set, as NCCL cannot tell the nodes. The calling thread's current device must
// be the communicator's.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include <gradsync/comm/communicator.hpp>
#include <gradsync/core/cuda.hpp>
#include <gradsync/core/error.hpp>

namespace gradsync {

namespace detail {

// One NCCL group: its completion event and the device copies of host buffers it uses.
struct nccl_batch {
    struct bounce {
        void* device;
        void* host; // a receive's destination, copied back once the group is done; null for a send
        std::size_t bytes;
    };

    cudaStream_t stream;
    cudaEvent_t done = nullptr;
    bool finished = false;
    std::vector<bounce> bounces;

    explicit nccl_batch(cudaStream_t s) : stream(s)
    {
        cuda_check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    }
    nccl_batch(const nccl_batch&) = delete;
    nccl_batch& operator=(const nccl_batch&) = delete;
    ~nccl_batch()
    {
        for (const bounce& b : bounces)
            cudaFreeAsync(b.device, stream); // stream-ordered: after the group, even if never waited on
        cudaEventDestroy(done);
    }
};

} // namespace detail

struct nccl_options {
    // Longest time one wait() may block; zero waits for ever.
    std::chrono::nanoseconds deadline{0};
};

class nccl_communicator {
public:
    static constexpr bool runs_host_algorithms = false;

    class request {
    public:
        request() = default;

    private:
        friend class nccl_communicator;
        explicit request(std::shared_ptr<detail::nccl_batch> b) : batch_(std::move(b)) {}
        std::shared_ptr<detail::nccl_batch> batch_;
    };

    // Wraps comm (not owned) and queues every operation on stream (not owned).
    nccl_communicator(ncclComm_t comm, cudaStream_t stream, nccl_options options = {})
        : comm_(comm), stream_(stream), options_(options)
    {
        if (options_.deadline.count() < 0)
            throw usage_error("gradsync::nccl_communicator: the deadline must not be negative");
        check(ncclCommUserRank(comm, &rank_), "ncclCommUserRank");
        check(ncclCommCount(comm, &size_), "ncclCommCount");
    }
    nccl_communicator(const nccl_communicator&) = delete;
    nccl_communicator& operator=(const nccl_communicator&) = delete;
    ~nccl_communicator()
    {
        if (open_)
            ncclGroupEnd(); // launch what was posted, so NCCL's group state stays balanced
    }

    int rank() const noexcept { return rank_; }
    int size() const noexcept { return size_; }
    bool device_memory() const noexcept { return true; }
    ncclComm_t get() const noexcept { return comm_; }
    cudaStream_t stream() const noexcept { return stream_; }
    // Ends every wait, now and later, with aborted_error (comm/communicator.hpp); any thread.
    void release() noexcept { released_.store(true, std::memory_order_relaxed); }

    request isend(std::span<const std::byte> data, int peer, int tag)
    {
        check_peer(peer, tag);
        if (data.empty())
            return {};
        detail::nccl_batch& b = open();
        const void* src = data.data();
        if (!detail::on_device(src)) {
            void* staged = bounce(b, nullptr, data.size());
            detail::cuda_check(cudaMemcpyAsync(staged, src, data.size(), cudaMemcpyHostToDevice, stream_),
                               "cudaMemcpyAsync");
            src = staged;
        }
        check(ncclSend(src, data.size(), ncclUint8, peer, comm_, stream_), "ncclSend");
        return request(open_);
    }

    request irecv(std::span<std::byte> data, int peer, int tag)
    {
        check_peer(peer, tag);
        if (data.empty())
            return {};
        detail::nccl_batch& b = open();
        void* dst = data.data();
        if (!detail::on_device(dst))
            dst = bounce(b, dst, data.size());
        check(ncclRecv(dst, data.size(), ncclUint8, peer, comm_, stream_), "ncclRecv");
        return request(open_);
    }

    void wait(request& r)
    {
        if (!r.batch_)
            return;
        const std::shared_ptr<detail::nccl_batch> b = std::move(r.batch_);
        if (b == open_)
            close();
        poll(b->done);
        if (b->finished)
            return;
        for (const detail::nccl_batch::bounce& x : b->bounces)
            if (x.host)
                detail::cuda_check(cudaMemcpyAsync(x.host, x.device, x.bytes, cudaMemcpyDeviceToHost, stream_),
                                   "cudaMemcpyAsync");
        detail::cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
        b->finished = true;
    }

    // Returns when the work queued on the stream has finished; NCCL's asynchronous errors
    // end it in a communication_error, as in wait().
    void synchronize()
    {
        detail::nccl_batch b(stream_);
        detail::cuda_check(cudaEventRecord(b.done, stream_), "cudaEventRecord");
        poll(b.done);
    }

private:
    std::string who() const { return "gradsync::nccl_communicator (" + where(*this) + "): "; }

    void check(ncclResult_t r, const char* call) const
    {
        if (r != ncclSuccess && r != ncclInProgress)
            throw communication_error(who() + call + " failed: " + ncclGetErrorString(r));
    }

    void check_peer(int peer, int tag) const
    {
        if (peer < 0 || peer >= size_)
            throw usage_error(who() + "peer " + std::to_string(peer) + " is out of range (tag " + std::to_string(tag) +
                              ")");
    }

    detail::nccl_batch& open()
    {
        if (!open_) {
            auto b = std::make_shared<detail::nccl_batch>(stream_);
            check(ncclGroupStart(), "ncclGroupStart");
            open_ = std::move(b);
        }
        return *open_;
    }

    void close()
    {
        const std::shared_ptr<detail::nccl_batch> b = std::move(open_);
        check(ncclGroupEnd(), "ncclGroupEnd");
        detail::cuda_check(cudaEventRecord(b->done, stream_), "cudaEventRecord");
    }

    void* bounce(detail::nccl_batch& b, void* host, std::size_t bytes)
    {
        void* p = nullptr;
        detail::cuda_check(cudaMallocAsync(&p, bytes, stream_), "cudaMallocAsync");
        b.bounces.push_back({p, host, bytes});
        return p;
    }

    void poll(cudaEvent_t done) const
    {
        const auto start = std::chrono::steady_clock::now();
        for (;;) {
            const cudaError_t e = cudaEventQuery(done);
            if (e == cudaSuccess)
                return;
            if (e != cudaErrorNotReady)
                throw communication_error(who() + "waiting for NCCL failed: " + cudaGetErrorString(e));
            ncclResult_t async = ncclSuccess;
            check(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
            if (async != ncclSuccess && async != ncclInProgress)
                throw communication_error(who() + "NCCL failed: " + ncclGetErrorString(async) +
                                          " (abort the NCCL communicator)");
            if (released_.load(std::memory_order_relaxed))
                throw aborted_error(who() + "a wait was released (abort the NCCL communicator)");
            if (options_.deadline.count() && std::chrono::steady_clock::now() - start >= options_.deadline)
                throw deadline_error(who() + "a wait did not complete within the deadline of " +
                                     std::to_string(std::chrono::duration<double>(options_.deadline).count()) +
                                     " s (abort the NCCL communicator)");
            std::this_thread::yield();
        }
    }

    ncclComm_t comm_;
    cudaStream_t stream_;
    nccl_options options_;
    std::atomic<bool> released_{false};
    int rank_ = 0;
    int size_ = 0;
    std::shared_ptr<detail::nccl_batch> open_;
};

} // namespace gradsync
