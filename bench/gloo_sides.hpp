// bench_allreduce_gloo's sides: every allreduce it compares, each as a function that
// prepares for `count` elements outside the timing and returns the call to time. All of
// them reduce a gloo_world's buffer in place, Sum, fp32 or fp16.
#pragma once

#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/math.h>
#include <gloo/types.h>

#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/gradsync.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace gradsync_bench {

static_assert(sizeof(gloo::float16) == sizeof(gradsync::half));

// What the sides share: the buffer they reduce (a shared_buffer's slot, which only
// gradsync_in_shared_buffer's reducer is told of), and a Gloo context of each side's own
// (contexts, for Gloo's sides: the classic algorithms resize their sockets' buffers) or a
// gloo_communicator on one (comms, for gradsync's), by side name; set up before a side is
// made.
struct gloo_world {
    std::unique_ptr<gradsync::shared_buffer> storage;
    std::map<std::string, std::unique_ptr<gradsync::gloo_communicator>> comms;
    std::map<std::string, std::shared_ptr<gloo::Context>> contexts;

    template <class T>
    T* data()
    {
        return storage->span<T>().data();
    }
};

using side_fn = std::function<std::function<void()>(std::size_t count, bool half)>;

struct side {
    std::string name;
    side_fn make;
    bool gloo;
};

// The settings docs/gloo.md gives for Gloo's TCP transport; main() may change them before
// the sides are made.
struct gloo_settings {
    gradsync::reducer_options options{.pipeline = {.segment_bytes = std::size_t(1) << 20, .window = 64}};
    // Message passing: shared memory is gradsync_shared_memory's side.
    gradsync::automatic automatic{.small_bytes = std::size_t(256) << 10, .share_memory = false};
    gradsync::tuned tuned{}; // its rule is `automatic`
    std::size_t send_buffer_bytes = std::size_t(512) << 10;
    // Every side's, Gloo's too: the same wires and the same threads.
    int network_thread_nice = 10;
    // gradsync_defaults' communicator keeps the library's gloo_options.
    gradsync::gloo_options communicator{.eager_bytes = std::size_t(64) << 10};
};

inline const char* algorithm_name(std::uint32_t code)
{
    switch (code) {
    case gradsync::recursive_doubling::code: return gradsync::recursive_doubling::name;
    case gradsync::recursive_halving::code: return gradsync::recursive_halving::name;
    default: return gradsync::ring::name;
    }
}

// A persistent gradsync reducer over the communicator that comm_of() returns; `in_storage`:
// built on the world's shared_buffer (made on that communicator), so that it reads the data
// in place. A tuned reducer tunes while the side is made, untimed, as in a trainer's first
// calls, on a buffer of its own; rank 0 says on stderr what it chose.
template <class Algorithm, class CommOf>
side_fn gradsync_side(gloo_world& w, CommOf comm_of, Algorithm algorithm, gradsync::reducer_options options,
                      bool in_storage = false)
{
    using comm_type = std::remove_reference_t<decltype(comm_of())>;
    return [&w, comm_of, algorithm, options, in_storage](std::size_t count, bool half) -> std::function<void()> {
        const auto make = [&]<class T>(std::type_identity<T>) -> std::function<void()> {
            gradsync::reducer_options o = options;
            if (in_storage)
                o.shared = w.storage.get();
            auto r = std::make_shared<gradsync::reducer<T, comm_type, gradsync::sum, Algorithm>>(comm_of(), count,
                                                                                                algorithm, o);
            std::function<void()> call = [r, &w, count] { (*r)(std::span<T>(w.data<T>(), count)); };
            if constexpr (std::is_same_v<Algorithm, gradsync::tuned>) {
                std::vector<T> scratch(count); // not the side's buffer, whose first sum main() checks
                for (std::size_t i = 0; i < r->plan().tuning_calls(); ++i)
                    (*r)(std::span<T>(scratch));
                const auto text = [](const gradsync::tuned_candidate& c) {
                    return std::string(algorithm_name(c.algorithm)) + ", " +
                        (c.order == gradsync::posting_order::receives_first ? "receives" : "sends") + " first";
                };
                if (comm_of().rank() == 0) {
                    const auto& p = r->plan();
                    std::fprintf(stderr, "tuned, %zu bytes of %s: %s (the rule's: %s); summed over ranks, us, median "
                                 "[interval]:",
                                 count * sizeof(T), gradsync::element_traits<T>::name, text(*p.chosen()).c_str(),
                                 text(p.preferred()).c_str());
                    for (std::size_t k = 0; k < p.measured().size(); ++k)
                        std::fprintf(stderr, " %.0f [%.0f, %.0f]", p.measured()[k] * 1e6, p.measured_low()[k] * 1e6,
                                     p.measured_high()[k] * 1e6);
                    std::fprintf(stderr, "\n");
                }
            }
            return call;
        };
        return half ? make(std::type_identity<gradsync::half>{}) : make(std::type_identity<float>{});
    };
}

// One of Gloo's classic algorithm objects (gloo::AllreduceRing and the others).
template <template <class> class Classic>
side_fn classic_side(gloo_world& w, const std::string& name)
{
    return [&w, name](std::size_t count, bool half) -> std::function<void()> {
        const auto& context = w.contexts.at(name);
        if (half) {
            auto a = std::make_shared<Classic<gloo::float16>>(context, std::vector<gloo::float16*>{w.data<gloo::float16>()},
                                                              int(count));
            return [a] { a->run(); };
        }
        auto a = std::make_shared<Classic<float>>(context, std::vector<float*>{w.data<float>()}, int(count));
        return [a] { a->run(); };
    };
}

// gloo::allreduce with its options.
inline side_fn collective_side(gloo_world& w, const std::string& name, gloo::AllreduceOptions::Algorithm algorithm)
{
    return [&w, name, algorithm](std::size_t count, bool half) -> std::function<void()> {
        auto o = std::make_shared<gloo::AllreduceOptions>(w.contexts.at(name));
        o->setAlgorithm(algorithm);
        o->setTag(7);
        if (half) {
            o->setOutput(w.data<gloo::float16>(), count);
            o->setReduceFunction(
                [](void* c, const void* a, const void* b, std::size_t n) { gloo::sum<gloo::float16>(c, a, b, n); });
        } else {
            o->setOutput(w.data<float>(), count);
            o->setReduceFunction([](void* c, const void* a, const void* b, std::size_t n) { gloo::sum<float>(c, a, b, n); });
        }
        return [o] { gloo::allreduce(*o); };
    };
}

// Every side, gradsync_tuned first (the one the Gloo sides are measured against).
inline std::vector<side> all_sides(gloo_world& w, const gloo_settings& s)
{
    using A = gloo::AllreduceOptions::Algorithm;
    const auto comm = [&w](const char* name) {
        return [&w, name]() -> gradsync::gloo_communicator& { return *w.comms.at(name); };
    };
    gradsync::reducer_options sends_first = s.options;
    sends_first.pipeline.order = gradsync::posting_order::sends_first;
    gradsync::tuned tuned = s.tuned;
    tuned.rule = s.automatic;
    return {{"gradsync_tuned", gradsync_side(w, comm("gradsync_tuned"), tuned, s.options), false},
            {"gradsync_automatic", gradsync_side(w, comm("gradsync_automatic"), s.automatic, s.options), false},
            {"gradsync_defaults", gradsync_side(w, comm("gradsync_defaults"),
                                                       gradsync::automatic{.share_memory = false}, {}),
             false},
            {"gradsync_sends_first", gradsync_side(w, comm("gradsync_sends_first"), s.automatic, sends_first), false},
            {"gradsync_doubling", gradsync_side(w, comm("gradsync_doubling"), gradsync::recursive_doubling{}, s.options),
             false},
            {"gradsync_ring", gradsync_side(w, comm("gradsync_ring"), gradsync::ring{}, s.options), false},
            {"gradsync_recursive_halving",
             gradsync_side(w, comm("gradsync_recursive_halving"), gradsync::recursive_halving{}, s.options), false},
            {"gradsync_shared_memory",
             gradsync_side(w, comm("gradsync_shared_memory"), gradsync::shared_memory{}, s.options), false},
            {"gradsync_in_shared_buffer",
             gradsync_side(w, comm("gradsync_in_shared_buffer"), gradsync::shared_memory{}, s.options, true), false},
            {"gloo_ring", classic_side<gloo::AllreduceRing>(w, "gloo_ring"), true},
            {"gloo_ring_chunked", classic_side<gloo::AllreduceRingChunked>(w, "gloo_ring_chunked"), true},
            {"gloo_halving_doubling", classic_side<gloo::AllreduceHalvingDoubling>(w, "gloo_halving_doubling"), true},
            {"gloo_bcube", classic_side<gloo::AllreduceBcube>(w, "gloo_bcube"), true},
            {"gloo_allreduce_ring", collective_side(w, "gloo_allreduce_ring", A::RING), true},
            {"gloo_allreduce_bcube", collective_side(w, "gloo_allreduce_bcube", A::BCUBE), true}};
}

} // namespace gradsync_bench
