// gloo_eager: gloo_communicator's eager messages (gloo_options::eager_bytes): a message of at
// most eager_bytes goes through a mailbox per peer (gloo/detail/mailbox.hpp) whose receives are
// posted ahead, so it leaves at once instead of waiting for its receiver's announcement.
//
// Cost: a mailbox per peer (its memory: gloo/detail/mailbox.hpp), taken when the communicator is
// made. Every rank must give the same eager_bytes, as a message's size decides its route.
//
// Teardown makes the communicator's destructor collective: every rank destroys its
// communicators in the same order, and each waits, at most the deadline, for its peers to
// fill the receives it posted ahead (gloo/detail/mailbox.hpp, "Teardown"). A rank whose
// communicator failed or was released closes those pairs instead.
//
// Errors are the communicator's: a wait goes through its watchdog and deadline (Link::block),
// a failure is recorded on it (Link::fail) and refuses its later posts. A receive whose
// peer's oldest unclaimed message has its tag but another size, or a foreign tag (core/tags.hpp),
// or is the peer's teardown, fails at once instead of waiting for the deadline.
#pragma once

#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gradsync/comm/gloo/detail/mailbox.hpp>
#include <gradsync/comm/gloo/detail/sigpipe.hpp>
#include <gradsync/core/error.hpp>
#include <gradsync/core/tags.hpp>

namespace gradsync::detail {

// A request's eager part: a receive's entry, or a send's ticket; pending until its wait.
struct gloo_eager_request {
    gloo_eager_receive* entry = nullptr;
    gloo_mailbox::ticket ticket;
    bool pending = false;
};

// Link: gloo_communicator, which befriends this class; it gives the context, the options,
// rank() and size(), and block(), fail(), prefix(), close_pair(), left_pending() and
// usable() (neither failed nor released).
template <class Link>
class gloo_eager {
    using clock = std::chrono::steady_clock;

public:
    // Posts every mailbox's receives, on the constructing thread (where the watchdog's
    // sentinels have blocked SIGPIPE). `mailbox_slot` and `count_slot` are slots no tag uses.
    gloo_eager(Link& link, std::uint64_t mailbox_slot, std::uint64_t count_slot)
        : link_(link), count_slot_(count_slot), boxes_(std::size_t(link.size()))
    {
        try {
            for (int p = 0; p < link.size(); ++p)
                if (p != link.rank())
                    boxes_[std::size_t(p)] = std::make_unique<gloo_mailbox>(
                        *link.context(), p, mailbox_slot, link.options().eager_bytes, link.options().eager_depth);
        } catch (const std::exception& e) {
            for (int p = 0; p < link.size(); ++p) // a box made halfway is gone, its receives posted
                if (p != link.rank())
                    link.close_pair(p);
            throw communication_error(link.prefix() + "posting the eager mailboxes' receives failed: " + e.what());
        }
    }
    gloo_eager(const gloo_eager&) = delete;
    gloo_eager& operator=(const gloo_eager&) = delete;
    ~gloo_eager() { drain(); }

    gloo_eager_request post(bool send, std::byte* p, std::size_t n, int peer, int tag)
    {
        gloo_mailbox& box = *boxes_[std::size_t(peer)];
        gloo_eager_request r;
        const auto what = [&] { return Link::describe(send, n, peer, tag); };
        if (send) {
            try {
                r.ticket = box.send({p, n}, tag);
            } catch (const std::exception& e) {
                const std::string why = what() + " could not start: " + e.what();
                link_.fail(why);
                throw communication_error(link_.prefix() + why);
            }
        } else {
            gloo_eager_receive& e = take_entry();
            e = {p, n, tag, false};
            try {
                box.post_receive(e);
            } catch (const std::exception& x) {
                box.break_off(x.what());
            }
            r.entry = &e;
        }
        r.pending = true;
        return r;
    }

    void wait(gloo_eager_request& r, bool send, std::size_t n, int peer, int tag)
    {
        gloo_mailbox& box = *boxes_[std::size_t(peer)];
        const clock::time_point start = clock::now();
        const auto what = [&] { return Link::describe(send, n, peer, tag); };
        if (send) {
            r.pending = false;
            if (box.pending(r.ticket))
                finish_out(box, r.ticket.box, start, what);
            return;
        }
        gloo_eager_receive& e = *r.entry;
        const auto refuse = [&](const std::string& why) {
            forget(r, peer);
            link_.fail(why);
            return link_.prefix() + why;
        };
        while (!e.done) {
            if (!box.broken().empty())
                throw communication_error(refuse(what() + " cannot complete: posting a mailbox receive from rank " +
                                                 std::to_string(peer) + " again failed: " + box.broken()));
            gloo_mailbox::header h{};
            if (box.oldest_held(h)) {
                const auto next = [&] { return ", rank " + std::to_string(peer) + "'s next eager message"; };
                if (h.tag == gloo_mailbox::filler)
                    throw communication_error(refuse(what() + " cannot complete" + next() +
                                                     " says it destroyed its communicator"));
                if (tags::foreign(int(h.tag), tag))
                    throw foreign_message_error(refuse("waiting for " + what() + next() + " has tag " +
                                                       std::to_string(h.tag)),
                                                peer, tag, int(h.tag));
                if (h.tag == tag && h.bytes != n)
                    throw communication_error(refuse(what() + next() + " with that tag has " +
                                                     std::to_string(h.bytes) + " bytes"));
            }
            gloo::transport::UnboundBuffer* arrival = box.next_arrival();
            if (!arrival)
                throw communication_error(refuse(what() + " cannot complete: the " +
                                                 std::to_string(link_.options().eager_depth) +
                                                 " eager messages from rank " + std::to_string(peer) +
                                                 " that arrived first match no receive (the oldest has tag " +
                                                 std::to_string(h.tag) + ", " + std::to_string(h.bytes) + " bytes)"));
            if (!link_.block(*arrival, peer, false, start, what)) {
                abandon(r, peer, "a wait was released");
                throw aborted_error(link_.prefix() + what() + " was released");
            }
            try {
                block_sigpipe();
                box.landed();
            } catch (const std::exception& x) {
                box.break_off(x.what());
            }
        }
        forget(r, peer);
    }

    // Ends r's eager part: its receive entry, if any, leaves its box for the pool.
    void forget(gloo_eager_request& r, int peer) noexcept
    {
        if (r.entry) {
            boxes_[std::size_t(peer)]->forget(*r.entry);
            free_entries_.push_back(std::exchange(r.entry, nullptr));
        }
        r.pending = false;
    }

    // r is left pending in Gloo, which cannot cancel it: forgetting its receive means nothing
    // lands in the caller's memory, and the pair to the peer is closed as for any request
    // left pending.
    void abandon(gloo_eager_request& r, int peer, const char* why) noexcept
    {
        forget(r, peer);
        link_.left_pending(why, peer);
    }

private:
    // Waits until the send out of box i has left.
    template <class What>
    void finish_out(gloo_mailbox& box, std::size_t i, clock::time_point start, const What& what)
    {
        if (!link_.block(*box.out_buffer(i), box.peer(), true, start, what)) {
            link_.left_pending("a wait was released", box.peer());
            throw aborted_error(link_.prefix() + what() + " was released");
        }
        box.finish_send(i);
    }

    gloo_eager_receive& take_entry()
    {
        if (free_entries_.empty()) {
            entries_.push_back(std::make_unique<gloo_eager_receive>());
            free_entries_.reserve(entries_.size()); // pushing an entry back never allocates
            return *entries_.back();
        }
        gloo_eager_receive* e = free_entries_.back();
        free_entries_.pop_back();
        return *e;
    }

    // Tells each peer how many receives this side posted, fills the peer's that this side's
    // sends left empty, and waits for the peer to fill this side's. Any failure closes the
    // pairs.
    void drain() noexcept
    {
        block_sigpipe();
        try {
            if (!link_.usable())
                throw aborted_error("");
            const clock::time_point start = clock::now();
            std::vector<std::uint64_t> mine(boxes_.size()), theirs(boxes_.size());
            struct count {
                std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
                int peer;
                bool send;
            };
            std::vector<count> counts;
            for (int p = 0; p < link_.size(); ++p)
                if (const auto& box = boxes_[std::size_t(p)]) {
                    mine[std::size_t(p)] = box->posted();
                    counts.push_back({link_.context()->createUnboundBuffer(&theirs[std::size_t(p)], 8), p, false});
                    counts.back().buffer->recv(p, count_slot_, 0, 8);
                    counts.push_back({link_.context()->createUnboundBuffer(&mine[std::size_t(p)], 8), p, true});
                    counts.back().buffer->send(p, count_slot_, 0, 8);
                }
            const auto what = [] { return std::string("draining the eager mailboxes"); };
            for (const count& c : counts)
                if (!link_.block(*c.buffer, c.peer, c.send, start, what))
                    throw aborted_error("");
            for (auto& box : boxes_)
                if (box) {
                    const std::uint64_t posted = theirs[std::size_t(box->peer())];
                    if (posted < box->sent())
                        throw communication_error("");
                    while (box->sent() < posted)
                        box->send({}, gloo_mailbox::filler);
                }
            for (auto& box : boxes_)
                if (box)
                    while (gloo::transport::UnboundBuffer* next = box->next_arrival()) {
                        if (!link_.block(*next, box->peer(), false, start, what))
                            throw aborted_error("");
                        box->landed();
                    }
            for (auto& box : boxes_)
                if (box)
                    for (std::size_t i = 0; i < box->out_boxes(); ++i)
                        if (box->out_busy(i))
                            finish_out(*box, i, start, what);
        } catch (...) {
            for (const auto& box : boxes_)
                if (box)
                    link_.close_pair(box->peer());
        }
    }

    Link& link_;
    std::uint64_t count_slot_;
    std::vector<std::unique_ptr<gloo_mailbox>> boxes_; // one per peer, none for this rank
    std::vector<std::unique_ptr<gloo_eager_receive>> entries_;
    std::vector<gloo_eager_receive*> free_entries_;
};

} // namespace gradsync::detail
