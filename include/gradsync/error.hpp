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

// A wait ran past its deadline: a peer never sent or never received (local_group's
// deadline option, the synchronizer's wait()). The message names the rank and the operation.
class deadline_error : public communication_error {
public:
    using communication_error::communication_error;
};

// This rank was released because another rank of its group failed.
class aborted_error : public error {
public:
    using error::error;
};

} // namespace gradsync
