// The hosts a test's processes run on: this host's loopback, host h at 127.0.0.h; or, where the
// environment variable named by the test is 1, the hosts of the test cluster
// (scripts/cluster.sh, named by GRADSYNC_CLUSTER and GRADSYNC_CLUSTER_NET), host h at NET.h,
// each process entering its host's network namespace before it makes a socket, with the
// host's name (PREFIX-hH, in a UTS namespace of its own, as `cluster.sh exec` gives it): the
// library takes processes of one host name for one host, whose memory they share. The process
// that stays in the root namespace (the test, a server it starts) is reached at the bridge's
// address, NET.254, or at 127.0.0.1 on loopback.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

namespace gradsync_test {

class cluster_hosts {
public:
    explicit cluster_hosts(const char* variable)
    {
        const char* across = std::getenv(variable);
        if (across == nullptr || std::string(across) != "1")
            return;
        const char* prefix = std::getenv("GRADSYNC_CLUSTER");
        const char* net = std::getenv("GRADSYNC_CLUSTER_NET");
        prefix_ = prefix ? prefix : "gs";
        net_ = net ? net : "10.77.0";
    }

    bool across() const noexcept { return !prefix_.empty(); }
    std::string address(int host) const { return net_ + "." + std::to_string(host); }
    std::string root_address() const { return across() ? net_ + ".254" : "127.0.0.1"; }

    // Moves the calling process into `host`'s network and gives it the host's name; on
    // loopback, nothing.
    void enter(int host) const
    {
        if (prefix_.empty())
            return;
        const std::string name = prefix_ + "-h" + std::to_string(host);
        const std::string path = "/run/netns/" + name;
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        const bool entered = fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
        if (fd >= 0)
            ::close(fd);
        if (!entered)
            throw std::runtime_error("cannot enter host " + std::to_string(host) + " (" + path +
                                     "): is the test cluster up? scripts/cluster.sh up 4");
        if (::unshare(CLONE_NEWUTS) != 0 || ::sethostname(name.c_str(), name.size()) != 0)
            throw std::runtime_error("cannot take host " + std::to_string(host) + "'s name " + name);
    }

private:
    std::string prefix_; // empty on loopback
    std::string net_ = "127.0.0";
};

} // namespace gradsync_test
