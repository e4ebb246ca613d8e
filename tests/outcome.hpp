// What a rank's call ended in, recorded per rank so that the main thread can check it
// (Catch2's assertions are not thread-safe, so rank code only records).
#pragma once

#include <gradsync/core/error.hpp>

#include <exception>
#include <string>

namespace gradsync_test {

enum class kind { none, ok, mismatch, usage, aborted, communication, other };

inline const char* kind_name(kind k)
{
    switch (k) {
    case kind::none: return "none";
    case kind::ok: return "no error";
    case kind::mismatch: return "mismatch_error";
    case kind::usage: return "usage_error";
    case kind::aborted: return "aborted_error";
    case kind::communication: return "communication_error";
    case kind::other: return "another exception";
    }
    return "?";
}

struct outcome {
    kind k = kind::none;
    std::string what;
    bool untouched = false;
};

// Runs f, classifies what it threw into o; rethrows when asked (to let run() see it).
template <class F>
void record(outcome& o, bool rethrow, F&& f)
{
    try {
        f();
        o.k = kind::ok;
    } catch (...) {
        try {
            throw;
        } catch (const gradsync::mismatch_error& e) {
            o.k = kind::mismatch, o.what = e.what();
        } catch (const gradsync::usage_error& e) {
            o.k = kind::usage, o.what = e.what();
        } catch (const gradsync::aborted_error& e) {
            o.k = kind::aborted, o.what = e.what();
        } catch (const gradsync::communication_error& e) {
            o.k = kind::communication, o.what = e.what();
        } catch (const std::exception& e) {
            o.k = kind::other, o.what = e.what();
        } catch (...) {
            o.k = kind::other;
        }
        if (rethrow)
            throw;
    }
}

// Runs rank code on every rank of `group`; "" or what escaped from run() (it rethrows the
// first exception), so one failing case is reported without hiding the others.
template <class Group, class F>
std::string run_ranks(Group& group, F&& f)
{
    try {
        group.run(f);
        return "";
    } catch (const std::exception& e) {
        return e.what();
    }
}

} // namespace gradsync_test
