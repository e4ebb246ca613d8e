// What every transport's request shares: it is move-only, and an operation it still holds
// when it is dropped or overwritten before its wait is abandoned, so that nothing lands in a
// buffer its owner has let go. The transport's State says how: take(State& from) moves
// from's operation in and leaves from holding none; abandon() ends the operation held, and
// does nothing when none is. The destructor here runs before State's, so abandon() still
// sees every member.
#pragma once

namespace gradsync::detail {

template <class State>
class owned_request : public State {
public:
    owned_request() = default;
    owned_request(owned_request&& o) noexcept { State::take(o); }
    owned_request& operator=(owned_request&& o) noexcept
    {
        if (this != &o) {
            State::abandon();
            State::take(o);
        }
        return *this;
    }
    ~owned_request() { State::abandon(); }
};

} // namespace gradsync::detail
