// What a call threw, as "kind: message" (the gradsync error's class, "error" for another
// gradsync::error, "other" for any other exception), or "" if it returned: for tests whose
// ranks are processes and report their outcome as text.
#pragma once

#include <gradsync/core/error.hpp>

#include <exception>
#include <string>

namespace gradsync_test {

template <class F>
std::string thrown(F&& f)
{
    try {
        f();
        return "";
    } catch (const gradsync::aborted_error& e) {
        return std::string("aborted_error: ") + e.what();
    } catch (const gradsync::membership_error& e) {
        return std::string("membership_error: ") + e.what();
    } catch (const gradsync::foreign_message_error& e) {
        return std::string("foreign_message_error: ") + e.what();
    } catch (const gradsync::mismatch_error& e) {
        return std::string("mismatch_error: ") + e.what();
    } catch (const gradsync::deadline_error& e) {
        return std::string("deadline_error: ") + e.what();
    } catch (const gradsync::communication_error& e) {
        return std::string("communication_error: ") + e.what();
    } catch (const gradsync::usage_error& e) {
        return std::string("usage_error: ") + e.what();
    } catch (const gradsync::error& e) {
        return std::string("error: ") + e.what();
    } catch (const std::exception& e) {
        return std::string("other: ") + e.what();
    }
}

} // namespace gradsync_test
