// Errors thrown by gradsync. Every message names what went wrong and where (which rank,
// which call), so a failing job explains itself on every rank instead of hanging.
#pragma once

#include <stdexcept>
#include <string>

namespace gradsync {

// Base of every gradsync exception.
class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A caller passed arguments that cannot be valid (layer sizes that do not add up, a peer
// out of range, a buffer of the wrong size).
class usage_error : public error {
public:
    using error::error;
};

// Ranks disagree on something that must be identical everywhere (count, layout, type,
// policy, algorithm). Thrown on every rank, before any user data is touched.
class mismatch_error : public error {
public:
    using error::error;
};

// The transport failed (an MPI error code, a message size mismatch between peers).
class communication_error : public error {
public:
    using error::error;
};

// A wait ran past its deadline: a peer never sent or never received (a communicator's
// deadline option, the synchronizer's wait()). The message names the rank, the peer and the
// operation; a reducer adds itself and its call.
class deadline_error : public communication_error {
public:
    using communication_error::communication_error;
};

// A transport waiting for a message from `peer` tagged `expected` found that peer's next
// message tagged `found`, of another reducer or call (core/tags.hpp); a reducer rethrows it as a
// mismatch_error naming both.
class foreign_message_error : public mismatch_error {
public:
    foreign_message_error(const std::string& what, int peer, int expected, int found)
        : mismatch_error(what), peer_(peer), expected_(expected), found_(found)
    {
    }
    int peer() const noexcept { return peer_; }
    int expected() const noexcept { return expected_; }
    int found() const noexcept { return found_; }

private:
    int peer_, expected_, found_;
};

// This rank was released: another rank of its group failed, or the communicator was
// released (comm/communicator.hpp).
class aborted_error : public error {
public:
    using error::error;
};

// An elastic group (elastic/group.hpp) cannot go on with this process: it is stale (a
// generation was formed without it), or too few ranks are left. Not a communication_error:
// a loop that re-forms the group on those must end on this one.
class membership_error : public error {
public:
    using error::error;
};

} // namespace gradsync
