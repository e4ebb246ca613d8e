// elastic_group: ranks that go on when members die or arrive. Membership is kept by
// generation in a redis_store (comm/gloo/redis_store.hpp); each generation is a Gloo
// communicator of its own, connected through the same store. docs/elastic.md has the model.
//
// Keys, under options.prefix (P), with {id} a process and {G} a generation:
//   P/alive/{id}             each process's lease, renewed by a thread every lease / 3 from
//                            construction to destruction; a process whose lease expired is dead
//                            to the others (killed, stopped, cut off);
//   P/generation             the last generation formed;
//   P/g{G}/candidate/{id}    a process that asks to be in generation G: the members of G - 1
//                            that re-form, and newcomers;
//   P/g{G}/sealer            the candidate that forms G, with a lease: one that dies while
//                            forming is replaced by another once its lease expires;
//   P/g{G}/members           G's members by rank, written once: the members of G - 1 first, in
//                            their old order, then newcomers by id, at most max_ranks;
//   P/g{G}/failed            why G could not be formed (too few candidates), for every
//                            candidate to name;
//   P/g{G}/ready/{id}        a member of G ready to connect: the members connect once all are,
//                            and form G + 1 instead where one died after G was formed;
//   P/g{G}/gloo/...          G's rendezvous (gloo_connect).
// G - 1's keys are erased once G's members are connected (by G's rank 0, else by G + 1's sealer).
// How a generation is formed and re-formed, newcomers and stale processes: docs/elastic.md,
// "The model". Why a store of the job's own and not a launcher's (TorchElastic restarts every
// worker): survivors keep their process, their memory and their data loader; only the
// communicator is made again.
//
// Preconditions: the members call the same collectives in the same order between boundaries
// (as any data-parallel step does), and every process of the job uses the same prefix and
// options.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <gradsync/collective/allreduce.hpp>
#include <gradsync/comm/gloo/gloo.hpp>
#include <gradsync/comm/gloo/redis_store.hpp>
#include <gradsync/comm/gloo/rendezvous.hpp>
#include <gradsync/core/error.hpp>

namespace gradsync {

struct elastic_options {
    // The job's keys in the store: every process of the job the same, and no other job's.
    std::string prefix = "gradsync/elastic";
    int min_ranks = 1;
    int max_ranks = 1 << 20;
    // A process whose lease is not renewed for this long is taken for dead.
    std::chrono::milliseconds lease{3000};
    // How long a sealer waits for more newcomers once every living member is a candidate.
    std::chrono::milliseconds join_window{200};
    // How long forming a generation may take before too few candidates is an error.
    std::chrono::milliseconds formation_timeout{60000};
    // Each generation's connection (hostname or interface, timeout) and communicator
    // (deadline: what turns a lost peer into an error, docs/cluster.md); the prefix is the
    // group's own.
    gloo_connect_options connect{};
    gloo_options communicator{};
};

class elastic_group {
public:
    using milliseconds = std::chrono::milliseconds;

    // Joins the job: forms its first generation with the others that start, or waits to be a
    // member of the next one. Throws membership_error where too few ranks come.
    elastic_group(redis_store& store, elastic_options options)
        : store_(&store), options_(std::move(options)), id_(make_id())
    {
        if (options_.min_ranks < 1 || options_.max_ranks < options_.min_ranks)
            throw usage_error(who() + ": min_ranks must be at least 1 and max_ranks at least min_ranks");
        if (options_.lease.count() < 3 || options_.formation_timeout <= options_.lease)
            throw usage_error(who() + ": the lease must be at least 3 ms and formation_timeout longer than it");
        store_->write(key("alive/" + id_), options_.connect.hostname, options_.lease);
        renewer_ = std::thread([this] { renew_lease(); });
        try {
            const std::optional<std::string> last = store_->read(key("generation"));
            enter(last ? std::stoull(*last) + 1 : 1);
        } catch (...) {
            stop_renewing();
            throw;
        }
    }

    elastic_group(const elastic_group&) = delete;
    elastic_group& operator=(const elastic_group&) = delete;

    // Leaves: the communicator first, then the lease, so that the others see this process gone.
    ~elastic_group()
    {
        flag_.reset();
        comm_.reset();
        stop_renewing();
        try {
            store_->erase({key("alive/" + id_)});
        } catch (const error&) { // the store is gone too: the lease expires by itself
        }
    }

    // The generation's communicator; after a reform() that threw there is none (usage_error).
    gloo_communicator& comm() { return *current(comm_); }
    int rank() const noexcept { return rank_; }
    int size() const noexcept { return int(members_.size()); }
    std::uint64_t generation() const noexcept { return generation_; }
    const std::string& id() const noexcept { return id_; }
    // The members' ids, by rank.
    const std::vector<std::string>& members() const noexcept { return members_; }

    // Collective over the generation, at an iteration boundary: whether a newcomer waits to
    // join (rank 0 asks the store and every rank learns its answer). When true, call reform().
    bool joiners_waiting()
    {
        float waiting = 0;
        if (rank_ == 0)
            waiting = store_->keys_under(key(generation_key(generation_ + 1) + "/candidate/")).empty() ? 0 : 1;
        (*current(flag_))(std::span<float>(&waiting, 1));
        return waiting > 0;
    }

    // Leaves the current generation and enters the next (see the top). Throws
    // membership_error where this process is stale or too few ranks are left.
    void reform()
    {
        flag_.reset();
        comm_.reset();
        const std::optional<std::string> last = store_->read(key("generation"));
        if (last && std::stoull(*last) > generation_) {
            const std::vector<std::string> next = members_of(generation_ + 1);
            if (std::find(next.begin(), next.end(), id_) == next.end())
                throw membership_error(who() + ": stale: rank " + std::to_string(rank_) + " of generation " +
                                       std::to_string(generation_) + ", but generation " +
                                       std::to_string(generation_ + 1) + " was formed without it (its lease of " +
                                       std::to_string(options_.lease.count()) +
                                       " ms expired, or it came too late); a new elastic_group joins as a newcomer");
        }
        enter(generation_ + 1);
    }

private:
    using clock = std::chrono::steady_clock;

    static std::string make_id()
    {
        char host[256] = {};
        ::gethostname(host, sizeof host - 1);
        return std::string(host) + ":" + std::to_string(::getpid()) + ":" + std::to_string(std::random_device{}());
    }

    template <class T>
    T* current(const std::unique_ptr<T>& p) const
    {
        if (!p)
            throw usage_error(who() + ": no generation to work in: reform() failed; a new elastic_group joins as a "
                                      "newcomer");
        return p.get();
    }

    static std::string generation_key(std::uint64_t g) { return "g" + std::to_string(g); }
    std::string key(const std::string& name) const { return options_.prefix + "/" + name; }
    std::string who() const { return "gradsync::elastic_group (" + id_ + ")"; }

    std::vector<std::string> members_of(std::uint64_t g)
    {
        std::vector<std::string> ids;
        if (const std::optional<std::string> text = store_->read(key(generation_key(g) + "/members"))) {
            std::istringstream in(*text);
            for (std::string line; std::getline(in, line);)
                ids.push_back(line);
        }
        return ids;
    }

    bool alive(const std::string& id) { return store_->read(key("alive/" + id)).has_value(); }

    // Becomes a candidate of generation g (or, where g was formed without it, of a later one)
    // and connects once it is formed; where connecting fails (a member died in between), the
    // same with the generation after.
    void enter(std::uint64_t g)
    {
        for (;;) {
            const std::string here = key(generation_key(g));
            const std::vector<std::string> formed = form(g);
            const auto at = std::find(formed.begin(), formed.end(), id_);
            if (at == formed.end()) { // formed without this newcomer: the next one
                ++g;
                continue;
            }
            {
                std::lock_guard lock(renewing_);
                generation_ = g;
                members_text_.clear();
                for (const std::string& id : formed)
                    members_text_ += id + "\n";
            }
            members_ = formed;
            rank_ = int(at - formed.begin());
            if (!all_ready(here, formed)) { // a member died after the forming: the next one
                ++g;
                continue;
            }
            gloo_connect_options connect = options_.connect;
            connect.prefix = here + "/gloo";
            try {
                comm_ = std::make_unique<gloo_communicator>(gloo_connect(*store_, rank_, size(), connect),
                                                            options_.communicator);
                flag_ = std::make_unique<reducer<float, gloo_communicator>>(*comm_, std::size_t(1));
            } catch (const membership_error&) {
                throw;
            } catch (const usage_error&) {
                throw;
            } catch (const error&) { // a member died while connecting: the next one
                flag_.reset();
                comm_.reset();
                ++g;
                continue;
            }
            // Every member of g is connected: g - 1's keys have served (forming g read its
            // members; a stale process reads g's). Where the store fails here, the sealer of
            // g + 1 erases them.
            if (rank_ == 0 && g > 1)
                try {
                    store_->erase(store_->keys_under(key(generation_key(g - 1)) + "/"));
                } catch (const error&) {
                }
            return;
        }
    }

    // Says this member is ready to connect, and waits until every member of the generation is,
    // or one is dead (its lease gone): then false, without waiting for Gloo's timeout on it.
    bool all_ready(const std::string& here, const std::vector<std::string>& formed)
    {
        store_->write(here + "/ready/" + id_, "");
        milliseconds pause(1);
        for (;;) {
            bool missing = false;
            for (const std::string& id : formed) {
                if (store_->read(here + "/ready/" + id))
                    continue;
                if (!alive(id))
                    return false;
                missing = true;
            }
            if (!missing)
                return true;
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, milliseconds(16));
        }
    }

    // Generation g's members, once some candidate has formed it; this one forms it where no
    // other does. Its candidate key lives while it waits (a newcomer may wait for the members'
    // next boundary); a sealer that dies is replaced once its key's lease expires.
    std::vector<std::string> form(std::uint64_t g)
    {
        const std::string here = key(generation_key(g));
        const std::string candidate = here + "/candidate/" + id_;
        store_->write(candidate, "", options_.lease);
        milliseconds pause(1);
        auto renewed = clock::now();
        for (;;) {
            if (std::vector<std::string> formed = members_of(g); !formed.empty())
                return formed;
            if (const std::optional<std::string> why = store_->read(here + "/failed"))
                throw membership_error(who() + ": generation " + std::to_string(g) + " was not formed: " + *why);
            if (store_->create(here + "/sealer", id_, options_.lease))
                seal(g);
            if (clock::now() - renewed >= options_.lease / 3) {
                store_->write(candidate, "", options_.lease);
                renewed = clock::now();
            }
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, milliseconds(16));
        }
    }

    // Forms generation g (this process holds its sealer key, renewed while it waits): waits,
    // without limit, for members of g - 1 that are alive and not yet candidates (they come at
    // their boundary, or their lease expires); gives up where, with none of those left, fewer
    // than min_ranks candidates stay formation_timeout.
    void seal(std::uint64_t g)
    {
        const auto deadline = clock::now() + options_.formation_timeout;
        const std::string here = key(generation_key(g));
        const std::vector<std::string> before = g > 1 ? members_of(g - 1) : std::vector<std::string>{};
        const clock::time_point unset = clock::time_point::max();
        clock::time_point complete = unset; // since when every living member of g - 1 is a candidate
        for (;;) {
            store_->renew(here + "/sealer", options_.lease);
            store_->write(here + "/candidate/" + id_, "", options_.lease);
            std::vector<std::string> candidates;
            for (const std::string& k : store_->keys_under(here + "/candidate/"))
                candidates.push_back(k.substr((here + "/candidate/").size()));
            std::vector<std::string> survivors, newcomers;
            bool waiting_for_member = false;
            for (const std::string& id : before) {
                const bool candidate = std::find(candidates.begin(), candidates.end(), id) != candidates.end();
                if (!alive(id))
                    continue;
                if (candidate)
                    survivors.push_back(id);
                else
                    waiting_for_member = true;
            }
            for (const std::string& id : candidates)
                if (std::find(before.begin(), before.end(), id) == before.end() && alive(id))
                    newcomers.push_back(id);
            const std::size_t count = survivors.size() + newcomers.size();
            const auto now = clock::now();
            if (!waiting_for_member && count >= std::size_t(options_.min_ranks)) {
                if (complete == unset)
                    complete = now;
                if (now >= complete + options_.join_window || count >= std::size_t(options_.max_ranks)) {
                    std::string list;
                    for (const std::string& id : survivors)
                        list += id + "\n";
                    for (std::size_t i = 0; i < newcomers.size() && survivors.size() + i < std::size_t(options_.max_ranks); ++i)
                        list += newcomers[i] + "\n";
                    store_->create(here + "/members", list);
                    store_->write(key("generation"), std::to_string(g));
                    if (g > 2) // where g - 1's rank 0 could not erase them
                        store_->erase(store_->keys_under(key(generation_key(g - 2)) + "/"));
                    return;
                }
            } else {
                complete = unset;
                if (!waiting_for_member && now >= deadline) {
                    store_->create(here + "/failed", std::to_string(count) + " living candidates, fewer than min_ranks " +
                                                         std::to_string(options_.min_ranks) + " within " +
                                                         std::to_string(options_.formation_timeout.count()) + " ms");
                    return;
                }
            }
            std::this_thread::sleep_for(milliseconds(10));
        }
    }

    // Renews this process's lease every lease / 3 until stop_renewing(); where the lease was
    // lost (the store restarted), writes it again, and the generation and its members with it
    // where the generation is gone too, so that a newcomer does not start a generation 1 beside this
    // one and the next generation waits for every living member.
    void renew_lease()
    {
        std::unique_lock lock(renewing_);
        while (!stop_) {
            stopped_.wait_for(lock, options_.lease / 3, [this] { return stop_; });
            if (stop_)
                return;
            const std::uint64_t generation = generation_;
            const std::string members = members_text_;
            lock.unlock(); // the store may take its timeout: reform() must not wait for that
            try {
                if (!store_->renew(key("alive/" + id_), options_.lease)) {
                    store_->write(key("alive/" + id_), options_.connect.hostname, options_.lease);
                    // The members only where the generation was gone too: a stale process
                    // (its lease expired, the store kept) must not bring back erased keys.
                    if (generation > 0 && store_->create(key("generation"), std::to_string(generation)))
                        store_->create(key(generation_key(generation) + "/members"), members);
                }
            } catch (const error&) { // the store is away: try again at the next turn
            }
            lock.lock();
        }
    }

    void stop_renewing()
    {
        {
            std::lock_guard lock(renewing_);
            stop_ = true;
        }
        stopped_.notify_all();
        if (renewer_.joinable())
            renewer_.join();
    }

    redis_store* store_;
    elastic_options options_;
    std::string id_;
    std::uint64_t generation_ = 0;     // written under renewing_, which the renewing thread reads it under
    std::string members_text_;         // the generation's members as the store keeps them; the same
    std::vector<std::string> members_;
    int rank_ = -1;
    std::unique_ptr<gloo_communicator> comm_;
    std::unique_ptr<reducer<float, gloo_communicator>> flag_; // joiners_waiting()'s
    std::mutex renewing_;
    std::condition_variable stopped_;
    bool stop_ = false;
    std::thread renewer_;
};

} // namespace gradsync
