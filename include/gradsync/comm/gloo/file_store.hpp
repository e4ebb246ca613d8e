// gloo_file_store: a gloo::rendezvous::FileStore in a directory no other local user can write.
//
// Why: the store is where ranks learn each other's addresses (and where gloo_connect's ranks
// tell each other they are connected), and FileStore writes its keys into whatever directory
// it is given. A user who can create files there, or put a directory of their own in its
// place, can plant an address and take a rank's place in the job (docs/cluster.md, "Who may
// join"). So gloo_file_store(path) takes a directory only when
//   - path is a directory, not a symbolic link to one, owned by this process's effective
//     user;
//   - neither its group nor others may write it (a POSIX ACL that lets another user write
//     shows as the group write bit, so it is refused too); reading is allowed: the keys hold
//     addresses, which any local user sees with `ss` anyway;
//   - every directory above it (of its real path) is owned by root or this user, and is
//     writable by its group or others only if sticky, so that no one else can rename it away
//     and put their own in its place: a directory of mode 0700 under /tmp (root's, 1777)
//     passes; /tmp itself, or any sticky directory, never does as the store: others create
//     files in it.
// A missing directory is created with mode 0700 (its parent must exist), so ranks that start
// together may all call this with the same path.
//
// The keys' own mode is FileStore's: it creates them with the process's umask (0644 under the
// usual 022), and a library cannot change the umask, which is per process, without racing
// every other thread that creates files. The directory is the protection: no one else may
// create, replace or rename a key in it. The checks hold for the job's lifetime, since no one
// but this user and root can change the directory or those above it.
#pragma once

#include <gloo/rendezvous/file_store.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <gradsync/core/error.hpp>

namespace gradsync {

namespace detail {

inline std::string octal_mode(mode_t mode)
{
    char text[8];
    std::snprintf(text, sizeof text, "%04o", unsigned(mode & 07777));
    return text;
}

} // namespace detail

// A FileStore over `path`, created with mode 0700 when missing; a usage_error naming the
// path and what is wrong when it, or a directory above it, could be written by another user.
inline std::unique_ptr<gloo::rendezvous::FileStore> gloo_file_store(const std::string& path)
{
    const std::string who = "gradsync::gloo_file_store(\"" + path + "\")";
    std::string own = path;
    while (own.size() > 1 && own.back() == '/') // "link/" would make lstat follow a link
        own.pop_back();
    if (own.empty())
        throw usage_error(who + ": the path is empty");
    if (::mkdir(own.c_str(), 0700) != 0 && errno != EEXIST)
        throw usage_error(who + ": cannot create the directory: " + std::strerror(errno));
    const uid_t me = ::geteuid();
    struct stat st {};
    if (::lstat(own.c_str(), &st) != 0)
        throw usage_error(who + ": " + std::strerror(errno));
    if (S_ISLNK(st.st_mode))
        throw usage_error(who + ": is a symbolic link; give the directory itself, which another user cannot "
                                "point elsewhere");
    if (!S_ISDIR(st.st_mode))
        throw usage_error(who + ": is not a directory");
    if (st.st_uid != me)
        throw usage_error(who + ": is owned by uid " + std::to_string(st.st_uid) + ", not by this process's uid " +
                          std::to_string(me) + ": its owner could plant addresses in it");
    if (st.st_mode & (S_IWGRP | S_IWOTH))
        throw usage_error(who + ": mode " + detail::octal_mode(st.st_mode) +
                          " lets its group or others write it, and so plant addresses; use a directory of mode "
                          "0700 (a missing one is created so)");
    char real[PATH_MAX];
    if (!::realpath(own.c_str(), real))
        throw usage_error(who + ": " + std::strerror(errno));
    for (std::string above = real; above != "/";) {
        above.erase(above.find_last_of('/'));
        if (above.empty())
            above = "/";
        struct stat up {};
        if (::stat(above.c_str(), &up) != 0)
            throw usage_error(who + ": cannot examine \"" + above + "\" above it: " + std::strerror(errno));
        if (up.st_uid != 0 && up.st_uid != me)
            throw usage_error(who + ": lies under \"" + above + "\", owned by uid " + std::to_string(up.st_uid) +
                              ", who could put another directory in its place");
        if ((up.st_mode & (S_IWGRP | S_IWOTH)) && !(up.st_mode & S_ISVTX))
            throw usage_error(who + ": lies under \"" + above + "\" (mode " + detail::octal_mode(up.st_mode) +
                              "), which its group or others can write and is not sticky: they could put "
                              "another directory in its place");
    }
    return std::make_unique<gloo::rendezvous::FileStore>(own);
}

} // namespace gradsync
