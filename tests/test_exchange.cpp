// The posting order of exchange.hpp's building blocks: sends before receives by default,
// receives before sends where the communicator says its sends wait for the receiver's
// announcement (receives_first, carried into the plan's cut by cut_for), either order where
// the pipeline options ask for it, and requests waited in the order they were posted. A communicator that only records what it is asked
// to do stands in for a transport; the expected order is written out here from the rule,
// message by message.
#include <catch2/catch.hpp>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include <gradsync/comm/delay/delay.hpp>
#include <gradsync/comm/subgroup.hpp>
#include <gradsync/plan/exchange.hpp>

namespace {

// Rank 0 of 2 with an eager limit of 32 bytes; every request is complete when waited. log
// gets "send <bytes>", "recv <bytes>" per post and "wait <post number>" per wait.
template <bool Early>
class recording_communicator {
public:
    struct request {
        int id = -1;
    };

    int rank() const { return 0; }
    int size() const { return 2; }
    std::size_t eager_limit() const { return 32; }
    bool receives_first() const
        requires Early
    {
        return true;
    }

    request isend(std::span<const std::byte> data, int, int) { return post("send", data.size()); }
    request irecv(std::span<std::byte> data, int, int) { return post("recv", data.size()); }
    void wait(request& r)
    {
        if (r.id >= 0)
            log.push_back("wait " + std::to_string(r.id));
        r.id = -1;
    }

    std::vector<std::string> log;

private:
    request post(const char* what, std::size_t bytes)
    {
        log.push_back(std::string(what) + " " + std::to_string(bytes));
        return {posts_++};
    }
    int posts_ = 0;
};

static_assert(gradsync::communicator<recording_communicator<false>>);
static_assert(gradsync::communicator<recording_communicator<true>>);

// Blocks of 16 and 20 elements cut into pieces of at most 8 (the eager limit, no
// segmenting).
template <bool Early>
std::vector<std::string> exchange_log(gradsync::posting_order order = gradsync::posting_order::transport)
{
    recording_communicator<Early> comm;
    std::vector<float> out(16), in(20);
    std::vector<typename recording_communicator<Early>::request> reqs(8);
    gradsync::exchange<float>(comm, 5, 1, std::span<const float>(out), 1, std::span<float>(in),
                              gradsync::cut_for(comm, {.order = order}), reqs);
    return comm.log;
}

const std::vector<std::string> sends_then_receives{"send 32", "send 32", "recv 28", "recv 28", "recv 24",
                                                   "wait 0",  "wait 1",  "wait 2",  "wait 3",  "wait 4"};
const std::vector<std::string> receives_then_sends{"recv 28", "recv 28", "recv 24", "send 32", "send 32",
                                                   "wait 0",  "wait 1",  "wait 2",  "wait 3",  "wait 4"};

} // namespace

TEST_CASE("exchange posts its sends first unless the communicator asks for receives first", "[exchange]")
{
    // The message cut gives 16 elements as two pieces of 8, and 20 as three of 7, 7 and 6.
    CHECK(exchange_log<false>() == sends_then_receives);
    CHECK(exchange_log<true>() == receives_then_sends);
}

TEST_CASE("the pipeline options' posting order overrides the communicator's", "[exchange]")
{
    using gradsync::posting_order;
    CHECK(exchange_log<false>(posting_order::receives_first) == receives_then_sends);
    CHECK(exchange_log<true>(posting_order::sends_first) == sends_then_receives);
    CHECK(exchange_log<false>(posting_order::sends_first) == sends_then_receives);
    CHECK(exchange_log<true>(posting_order::receives_first) == receives_then_sends);
}

TEST_CASE("exchange_segments posts its first window of receives before the sends where asked", "[exchange]")
{
    // 10 elements received in segments of 2 (8-byte segments), two in flight, into a ring of
    // two slots; one send of 3 elements.
    const auto log = [](auto comm) {
        std::vector<float> out(3), ring(4);
        std::vector<typename decltype(comm)::request> reqs(3);
        std::vector<std::size_t> landed;
        gradsync::exchange_segments<float>(comm, 5, 1, std::span<const float>(out), 1, 10, std::span<float>(ring), 2,
                                           gradsync::cut_for(comm, {.segment_bytes = 8}, true), reqs,
                                           [&](std::size_t begin, std::span<float>) { landed.push_back(begin); });
        CHECK(landed == std::vector<std::size_t>{0, 2, 4, 6, 8});
        return comm.log;
    };
    // A ring slot is received into again only after its segment has landed: receive 2 is
    // posted after wait 0, and so on.
    CHECK(log(recording_communicator<false>{}) ==
          std::vector<std::string>{"send 12", "recv 8", "recv 8", "wait 1", "recv 8", "wait 2", "recv 8", "wait 3",
                                   "recv 8", "wait 4", "wait 5", "wait 0"});
    CHECK(log(recording_communicator<true>{}) ==
          std::vector<std::string>{"recv 8", "recv 8", "send 12", "wait 0", "recv 8", "wait 1", "recv 8", "wait 3",
                                   "recv 8", "wait 4", "wait 5", "wait 2"});
}

TEST_CASE("subgroup and delay_communicator keep the inner communicator's posting order", "[exchange]")
{
    recording_communicator<true> early;
    recording_communicator<false> late;
    const int members[] = {0, 1};
    CHECK(gradsync::receives_first(gradsync::subgroup(early, members)));
    CHECK_FALSE(gradsync::receives_first(gradsync::subgroup(late, members)));
    CHECK(gradsync::receives_first(gradsync::delay_communicator(early, {})));
    CHECK_FALSE(gradsync::receives_first(gradsync::delay_communicator(late, {})));
}
