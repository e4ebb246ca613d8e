// Allreduce: reducer<> (plan once, run many) and allreduce() (one call).
//
//   gradsync::reducer<float, Comm, gradsync::average, gradsync::ring> r(comm, layer_sizes);
//   r(std::span<float>(grad));                       // in place, every call
//
//   gradsync::allreduce(comm, std::span<float>(grad)); // Sum, automatic algorithm
//
// Constructing a reducer is collective: every rank of the communicator must construct one
// with the same element type, policy, algorithm, count, layer layout and options. It plans
// the schedule, allocates every scratch buffer and request slot, and checks agreement
// (collective/verify.hpp), throwing on every rank if the ranks disagree. A call then allocates nothing
// and sends only the algorithm's own messages. allreduce() builds a reducer per call (the
// agreement check included); use a reducer for repeated reductions.
//
// The plan comes from the table (selector/plan_table.hpp) for (algorithm, policy, host memory);
// Policy must model reduction_policy and Algorithm allreduce_algorithm, so arguments in the
// wrong order fail to compile with the concept's name.
//
// Call order: every rank must call its reducers in the same order, each reducer pairing
// with the one built at the same point on the other ranks. Each call's messages carry the
// reducer's identity and call number (core/tags.hpp), so a call out of order never mixes data:
// its receives wait, and a transport that sees the other reducer's message ends the wait in
// a mismatch_error naming both reducers (or both calls). A call that fails leaves the ranks
// out of step: the reducer refuses every later call with a usage_error.
//
// Errors from a call name the reducer: "gradsync::reducer (rank 0 of 2): reducer #3 (100
// fp32 elements in 3 layers, sum, ring), call 7: " and then the transport's message.
//
// Thread safety: one reducer runs one reduction at a time. Reducers that may run
// concurrently on the same communicator need distinct tags (reducer_options::tag, 0..32765).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include <gradsync/collective/verify.hpp>
#include <gradsync/comm/communicator.hpp>
#include <gradsync/comm/shared/board.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/layout.hpp>
#include <gradsync/core/tags.hpp>
#include <gradsync/core/types.hpp>
#include <gradsync/memory/host_memory.hpp>
#include <gradsync/plan/exchange.hpp>
#include <gradsync/plan/plan.hpp>
#include <gradsync/policy/reduction_policy.hpp>
#include <gradsync/policy/sum.hpp>
#include <gradsync/selector/automatic.hpp>
#include <gradsync/selector/plan_table.hpp>

namespace gradsync {

struct reducer_options {
    int tag = tags::reducer;
    pipeline_options pipeline{};
    // The buffer the data lies in, made on the same communicator, the same on every rank: a
    // shared-memory plan reads the ranks' data there in place (comm/shared/buffer.hpp).
    const shared_buffer* shared = nullptr;

    template <class Algorithm>
    plan_options<Algorithm> for_plan(const Algorithm& algorithm) const
    {
        return {algorithm, pipeline, shared};
    }
};

namespace detail {

// A plan built once every rank has agreed on its signature, the size check of every call,
// the call's stamped tag and the naming of its errors: what every collective shares (the
// reducers, the broadcasters, and the allgatherers, gatherers, scatterers and exchangers).
// `who` names the collective in messages, `what` its object ("reducer"), `about` what it
// was planned for; the plan is built from (comm, plan_args...).
template <communicator Comm, class Plan>
class agreed_plan {
public:
    using plan_type = Plan;

    template <class... PlanArgs>
    agreed_plan(Comm& comm, const signature& mine, std::span<const std::size_t> detail, int tag, const char* who,
                const char* what, const std::string& about, PlanArgs&&... plan_args)
        : who_(who), what_(what), base_(tag), bits_(tags::stamp_bits(tag_limit(comm))),
          identity_(agree(comm, mine, who, detail)), plan_(comm, std::forward<PlanArgs>(plan_args)...),
          name_(std::string(what) + " #" + std::to_string(identity_) + " (" + about + ")")
    {
    }

    void operator()(Comm& comm, typename plan_type::data_type data)
    {
        check_size(comm, data.size());
        if (failed_)
            throw usage_error(prefix(comm) + "refused: call " + std::to_string(failed_) +
                              " failed, so the ranks may be out of step (abort the job, e.g. MPI_Abort)");
        const std::uint64_t call = ++calls_;
        try {
            const int tag = tags::stamped(base_, identity_, call, bits_);
            const position_scope at(&comm, board_.get(), lane_, comm.rank(), tag);
            plan_.run(comm, data, tag);
        } catch (...) {
            failed_ = call;
            rethrow_named(comm, call);
        }
    }

    void check_size(const Comm& comm, std::size_t elements) const
    {
        if (elements != plan_.count())
            throw usage_error(std::string(who_) + " (" + where(comm) + "): buffer holds " + std::to_string(elements) +
                              " elements, the " + what_ + " was planned for " + std::to_string(plan_.count()));
    }

    const plan_type& plan() const noexcept { return plan_; }
    std::uint64_t identity() const noexcept { return identity_; }
    std::uint64_t calls() const noexcept { return calls_; }

private:
    // The agreement check, with rank 0's position board and position offered; every other rank
    // takes the board (the one comm keeps, or opened) and moves its lane to rank 0's position.
    // The identity.
    std::uint64_t agree(Comm& comm, signature mine, const char* who, std::span<const std::size_t> detail)
    {
        const bool shares = comm.size() > 1 && may_share_memory(comm);
        if (shares && comm.rank() == 0) {
            board_ = rank0_board(comm);
            lane_ = board_ ? board_->claim(0, base_) : nullptr;
            if (lane_) {
                mine.board = board_->offered();
                mine.board_at = lane_->at.load(std::memory_order_relaxed);
            }
        }
        const signature first = verify_agreement(comm, mine, who, detail);
        if (shares && comm.rank() != 0 && first.board.key != 0) {
            board_ = opened_board(comm, first.board);
            lane_ = board_ ? board_->claim(comm.rank(), base_) : nullptr;
            if (lane_)
                lane_->at.store(first.board_at, std::memory_order_release);
        }
        return first.identity;
    }

    // Rank 0's board: the one comm keeps, or a new one it then keeps; without a holder, the
    // one this process's collectives on comm share.
    static std::shared_ptr<position_board> rank0_board(Comm& comm)
    {
        if constexpr (requires { { comm.board() } -> std::same_as<board_holder&>; }) {
            std::shared_ptr<position_board> board = comm.board().get();
            if (!board || board->ranks() != comm.size()) {
                board = position_board::make(comm.size());
                comm.board().set(board);
            }
            return board;
        } else {
            return position_board::of(&comm, comm.size());
        }
    }

    // Another rank's: the board comm keeps if it is the one offered, else the offered one opened
    // (and kept).
    static std::shared_ptr<position_board> opened_board(Comm& comm, const position_board::offer& offered)
    {
        if constexpr (requires { { comm.board() } -> std::same_as<board_holder&>; }) {
            std::shared_ptr<position_board> board = comm.board().get();
            if (board && board->key() == offered.key)
                return board;
            board = position_board::open(offered, comm.size());
            comm.board().set(board);
            return board;
        } else {
            return position_board::open(offered, comm.size());
        }
    }

    std::string prefix(const Comm& comm) const { return std::string(who_) + " (" + where(comm) + "): " + name_ + ", "; }

    // The error in flight, rethrown as its own kind with this plan's name and call in front.
    [[noreturn]] void rethrow_named(const Comm& comm, std::uint64_t call) const
    {
        const std::string at = prefix(comm) + "call " + std::to_string(call) + ": ";
        try {
            throw;
        } catch (const foreign_message_error& e) {
            throw mismatch_error(at + e.what() + ", " + foreign(e, call));
        } catch (const deadline_error& e) {
            throw deadline_error(at + e.what());
        } catch (const aborted_error& e) {
            throw aborted_error(at + e.what());
        } catch (const mismatch_error& e) {
            throw mismatch_error(at + e.what());
        } catch (const communication_error& e) {
            throw communication_error(at + e.what());
        } catch (const usage_error& e) {
            throw usage_error(at + e.what());
        } catch (const error& e) {
            throw error(at + e.what());
        }
    }

    // What the stamp of a peer's message says: another collective's (the identity nearest this
    // one with those low bits), or another call of this one.
    std::string foreign(const foreign_message_error& e, std::uint64_t call) const
    {
        const tags::stamp theirs = tags::stamp_of(e.found(), bits_);
        const std::string peer = "rank " + std::to_string(e.peer());
        const int id_bits = tags::identity_bits(bits_);
        const std::uint64_t ids = std::uint64_t(1) << id_bits;
        const std::uint64_t up = (theirs.identity - tags::low_bits(identity_, id_bits)) & (ids - 1);
        if (up != 0) {
            const std::uint64_t other = up <= ids / 2 ? identity_ + up : identity_ - (ids - up);
            // Every collective draws its identity from one count, so the number may be any kind's.
            const std::string id = std::to_string(other);
            return "which belongs to reducer #" + id + ", broadcaster #" + id + ", allgatherer #" + id +
                ", gatherer #" + id + ", scatterer #" + id + " or exchanger #" + id + ", not to this " + what_ +
                ": " + peer + " called another where this rank called this one; every rank must call its "
                "collectives in the same order";
        }
        const std::uint64_t ahead = tags::low_bits(theirs.call - call, std::min(bits_, tags::call_bits));
        const std::string where_it_is = ahead == 1 ? "one call ahead of" : ahead == 2 ? "two calls away from" : "one call behind";
        return "which belongs to this " + std::string(what_) + "'s call " +
            std::to_string(ahead == 1 ? call + 1 : ahead == 2 ? call + 2 : call - 1) + ": " + peer + " is " +
            where_it_is + " this rank (a rank skipped a call, or made an extra one)";
    }

    const char* who_;
    const char* what_;
    int base_, bits_;
    std::shared_ptr<position_board> board_; // where this rank publishes its calls (none: not shared)
    position_board::lane* lane_ = nullptr;  // this rank's on the base tag
    std::uint64_t identity_;
    plan_type plan_;
    std::string name_;
    std::uint64_t calls_ = 0;
    std::uint64_t failed_ = 0; // the call that failed, if one did
};

// The agreed plan of a reduction: the plan of (Algorithm, Policy, Memory) from the table.
template <element T, communicator Comm, class Policy, class Algorithm, class Memory>
class agreed_reduction : public agreed_plan<Comm, plan_of<T, Comm, Algorithm, Policy, Memory>> {
    static_assert(reduction_plan<plan_of<T, Comm, Algorithm, Policy, Memory>>,
                  "gradsync: a plan of the table does not model reduction_plan");

public:
    agreed_reduction(Comm& comm, std::size_t count, const layer_layout& layout, const plan_options<Algorithm>& options,
                     int tag, const char* who)
        : agreed_plan<Comm, plan_of<T, Comm, Algorithm, Policy, Memory>>(
              comm, call_signature<T, Policy, Memory>(comm, count, layout, options, tag), layout.sizes(), tag, who,
              "reducer",
              std::to_string(count) + " " + element_traits<T>::name + " elements in " +
                  std::to_string(layout.layers()) + (layout.layers() == 1 ? " layer, " : " layers, ") + Policy::name +
                  ", " + Algorithm::name,
              layout, options)
    {
    }
};

inline std::size_t total_of(std::span<const std::size_t> layers) { return layer_layout(0, layers).total(); }

} // namespace detail

template <element T, communicator Comm, reduction_policy Policy = sum, allreduce_algorithm Algorithm = automatic>
class reducer {
    static_assert(has_plan<T, Comm, Algorithm, Policy>,
                  "gradsync::reducer: no plan runs this algorithm for this policy in host memory (selector/plan_table.hpp)");
    using agreed = detail::agreed_reduction<T, Comm, Policy, Algorithm, host_memory>;

public:
    using plan_type = typename agreed::plan_type;

    // count elements in `layers` (empty: one layer); the layers must add up to count.
    reducer(Comm& comm, std::size_t count, std::span<const std::size_t> layers, Algorithm algorithm = {},
            reducer_options options = {})
        : comm_(&comm), layout_(count, layers),
          plan_(comm, count, layout_, options.for_plan(algorithm), options.tag, "gradsync::reducer")
    {
    }

    reducer(Comm& comm, std::span<const std::size_t> layers, Algorithm algorithm = {}, reducer_options options = {})
        : reducer(comm, detail::total_of(layers), layers, algorithm, options)
    {
    }

    reducer(Comm& comm, std::size_t count, Algorithm algorithm = {}, reducer_options options = {})
        : reducer(comm, count, std::span<const std::size_t>(), algorithm, options)
    {
    }

    // Reduces data in place on every rank. data.size() must equal count().
    void operator()(std::span<T> data) { plan_(*comm_, data); }

    std::size_t count() const noexcept { return layout_.total(); }
    const layer_layout& layout() const noexcept { return layout_; }
    const plan_type& plan() const noexcept { return plan_.plan(); }
    // The identity every rank's reducer shares, carried in its messages (core/tags.hpp).
    std::uint64_t identity() const noexcept { return plan_.identity(); }

private:
    Comm* comm_;
    layer_layout layout_;
    agreed plan_;
};

// One allreduce, in place. layers: element counts of the layers fused in data (empty: one).
template <communicator Comm, element T, reduction_policy Policy = sum, allreduce_algorithm Algorithm = automatic>
void allreduce(Comm& comm, std::span<T> data, Policy = {}, Algorithm algorithm = {},
               std::span<const std::size_t> layers = {}, reducer_options options = {})
{
    reducer<T, Comm, Policy, Algorithm> r(comm, data.size(), layers, algorithm, options);
    r(data);
}

} // namespace gradsync
