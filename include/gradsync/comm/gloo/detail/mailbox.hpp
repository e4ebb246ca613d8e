// gloo_mailbox: gloo_communicator's eager messages to and from one peer
// (gloo_options::eager_bytes).
//
// Why: a Gloo send of an unbound buffer leaves only once the receiver's announcement has come
// back, so a small message costs a round trip plus a hop through the sender's network thread.
// The mailbox keeps `depth` receives from the peer posted ahead, into memory of its own, on
// one slot; an eager send finds an announcement waiting and is written at once by the
// sending thread. Gloo fills a slot's receives in the order they were posted.
//
// A message is a header (its tag and byte count) and its bytes, copied into the mailbox's
// send memory and out of its receive memory: 2 copies of at most eager_bytes against a round
// trip. An arriving message goes to the oldest posted receive with its tag and byte count,
// and a posted receive takes the oldest held message with both: the concept's
// non-overtaking rule. A message that no receive takes stays in its box; when all `depth`
// boxes hold such messages, the peer's next eager send stays pending in Gloo until a receive
// takes one. Sending never waits: a send goes out of a send box of its own, and the send
// boxes grow to the most sends in flight to the peer (kept, so a plan run again takes none
// anew), because a rank that waited in isend() for the peer's receives could stall a peer
// that is posting sends too before it waits on any receive.
//
// Teardown: Gloo cannot cancel a posted receive, and a box freed under it would stall the
// connection. Before a mailbox goes, gloo_communicator's destructor (gloo/detail/eager.hpp, drain())
// fills every box the peer posted (filler messages, tag -1) and waits for the peer to fill
// this side's, which makes that destructor collective; where it cannot, it closes the pair.
//
// Memory per peer: depth * (16 + eager_bytes) bytes of receive boxes, taken when the
// communicator is made, and as much again per send in flight, at least depth.
#pragma once

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gradsync::detail {

// An eager receive posted by the user: where its bytes go, and whether they are there.
struct gloo_eager_receive {
    std::byte* data = nullptr;
    std::size_t bytes = 0;
    int tag = 0;
    bool done = false;
};

class gloo_mailbox {
public:
    struct header {
        std::int64_t tag; // -1: a filler sent while draining
        std::uint64_t bytes;
    };
    static constexpr std::size_t header_bytes = sizeof(header);
    static constexpr std::int64_t filler = -1;

    gloo_mailbox(gloo::Context& context, int peer, std::uint64_t slot, std::size_t eager_bytes, std::size_t depth)
        : context_(context), peer_(peer), slot_(slot), box_bytes_(header_bytes + eager_bytes),
          memory_(depth * box_bytes_), in_(depth)
    {
        for (std::size_t i = 0; i < depth; ++i) {
            in_[i] = context.createUnboundBuffer(in_memory(i), box_bytes_);
            add_out();
        }
        posted_.reserve(depth);
        held_.reserve(depth);
        receives_.reserve(depth);
        for (std::size_t i = 0; i < depth; ++i)
            post(i);
    }

    int peer() const noexcept { return peer_; }

    // --- receiving

    // Registers r, which takes the oldest held message with its tag and size at once if
    // there is one.
    void post_receive(gloo_eager_receive& r)
    {
        for (std::size_t k = 0; k < held_.size(); ++k)
            if (matches(held_[k], r)) {
                const std::size_t box = held_[k];
                held_.erase(held_.begin() + std::ptrdiff_t(k));
                deliver(box, r);
                return;
            }
        receives_.push_back(&r);
    }

    // Unregisters r (a request dropped before its wait).
    void forget(const gloo_eager_receive& r) noexcept
    {
        std::erase(receives_, &r);
    }

    // The oldest posted box, which the peer's next eager message fills; none while every box
    // holds a message no receive took.
    gloo::transport::UnboundBuffer* next_arrival() noexcept
    {
        return posted_.empty() ? nullptr : in_[posted_.front()].get();
    }

    // The next box has landed (its wait returned): hands the message to the oldest matching
    // receive, or holds it. Returns the message's tag.
    std::int64_t landed()
    {
        const std::size_t box = posted_.front();
        posted_.erase(posted_.begin());
        const header h = header_of(box);
        if (h.tag == filler) {
            held_.push_back(box);
            return h.tag;
        }
        for (std::size_t k = 0; k < receives_.size(); ++k)
            if (matches(box, *receives_[k])) {
                gloo_eager_receive& r = *receives_[k];
                receives_.erase(receives_.begin() + std::ptrdiff_t(k));
                deliver(box, r);
                return h.tag;
            }
        held_.push_back(box);
        return h.tag;
    }

    // The header of the oldest message no receive took (tag -1: a filler, the peer is
    // draining), if any.
    bool oldest_held(header& h) const noexcept
    {
        if (held_.empty())
            return false;
        h = header_of(held_.front());
        return true;
    }

    // A box's next receive could not be posted (the pair closed: the peer may be gone once
    // done). What the box delivered stands; a receive that still waits on this peer fails.
    void break_off(const char* why)
    {
        if (broken_.empty())
            broken_ = why;
    }
    const std::string& broken() const noexcept { return broken_; }

    // --- sending

    struct ticket {
        std::size_t box = 0;
        std::uint64_t generation = 0;
    };

    // A send box is busy from send() until the caller has waited for its send (finish_send).
    gloo::transport::UnboundBuffer* out_buffer(std::size_t box) noexcept { return out_[box].buffer.get(); }
    std::size_t out_boxes() const noexcept { return out_.size(); }
    bool out_busy(std::size_t box) const noexcept { return out_[box].busy; }
    void finish_send(std::size_t box) noexcept
    {
        if (out_[box].busy)
            free_out_.push_back(box);
        out_[box].busy = false;
    }

    // Copies the message into a free send box, a new one if none is, and sends it.
    ticket send(std::span<const std::byte> data, std::int64_t tag)
    {
        if (free_out_.empty())
            add_out();
        const std::size_t box = free_out_.back();
        out_box& o = out_[box];
        const header h{tag, data.size()};
        std::memcpy(o.memory.get(), &h, header_bytes);
        if (!data.empty())
            std::memcpy(o.memory.get() + header_bytes, data.data(), data.size());
        o.buffer->send(peer_, slot_, 0, header_bytes + data.size());
        free_out_.pop_back();
        o.busy = true;
        ++sent_;
        return {box, ++o.generation};
    }

    // Whether the send of t is still unfinished (no later send took its box).
    bool pending(const ticket& t) const noexcept { return out_[t.box].generation == t.generation && out_[t.box].busy; }

    // --- draining

    // Receives this side posted in all, and eager sends it made (fillers included).
    std::uint64_t posted() const noexcept { return posts_; }
    std::uint64_t sent() const noexcept { return sent_; }
    // Posted receives not landed yet.
    std::size_t outstanding() const noexcept { return posted_.size(); }

private:
    bool matches(std::size_t box, const gloo_eager_receive& r) const noexcept
    {
        const header h = header_of(box);
        return h.tag == r.tag && h.bytes == r.bytes;
    }

    void deliver(std::size_t box, gloo_eager_receive& r)
    {
        if (r.bytes)
            std::memcpy(r.data, in_memory(box) + header_bytes, r.bytes);
        r.done = true;
        post(box);
    }

    void post(std::size_t box)
    {
        in_[box]->recv(peer_, slot_, 0, box_bytes_);
        posted_.push_back(box);
        ++posts_;
    }

    void add_out()
    {
        out_box o;
        o.memory = std::make_unique<std::byte[]>(box_bytes_);
        o.buffer = context_.createUnboundBuffer(o.memory.get(), box_bytes_);
        out_.push_back(std::move(o));
        free_out_.reserve(out_.size()); // finish_send never allocates
        free_out_.push_back(out_.size() - 1);
    }

    header header_of(std::size_t box) const noexcept
    {
        header h;
        std::memcpy(&h, memory_.data() + box * box_bytes_, header_bytes);
        return h;
    }

    std::byte* in_memory(std::size_t box) noexcept { return memory_.data() + box * box_bytes_; }

    struct out_box {
        std::unique_ptr<std::byte[]> memory;
        std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
        std::uint64_t generation = 0;
        bool busy = false;
    };

    gloo::Context& context_;
    int peer_;
    std::uint64_t slot_;
    std::size_t box_bytes_;
    std::vector<std::byte> memory_; // depth receive boxes
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> in_;
    std::vector<out_box> out_;        // send boxes, grown to the most sends in flight
    std::vector<std::size_t> free_out_; // send boxes not busy
    std::vector<std::size_t> posted_;               // receive boxes in the order posted (= landing order)
    std::vector<std::size_t> held_;                 // landed boxes no receive took, in landing order
    std::vector<gloo_eager_receive*> receives_;     // posted receives not yet matched, in posting order
    std::uint64_t posts_ = 0, sent_ = 0;
    std::string broken_; // why a receive could not be posted again; empty while none
};

} // namespace gradsync::detail
