// gloo_connect: a connected gloo::Context for gloo_communicator, made the way every Gloo job
// makes one: a TCP device, a store all ranks reach, and connectFullMesh.
//
// The store is where the ranks find each other's addresses. gloo::rendezvous::FileStore over
// a directory serves ranks on one host (or on hosts sharing a file system); TCP stores
// (PyTorch's c10d::TCPStore behind an adapter) or gloo::rendezvous::RedisStore serve several
// hosts. Keys are written under `prefix`, so jobs, or several contexts of one job, can share
// one store. Every rank must call with the same size and prefix; it returns once every rank
// is connected.
#pragma once

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gradsync/error.hpp>

namespace gradsync {

struct gloo_connect_options {
    // The address other ranks reach this one at (the device's interface); a host name or
    // numeric address. 127.0.0.1 keeps a job on one host.
    std::string hostname = "127.0.0.1";
    // Gloo's own timeout: connecting, and every wait that has no deadline of its own.
    std::chrono::milliseconds timeout{30000};
    std::string prefix = "gradsync";
};

inline std::shared_ptr<gloo::Context> gloo_connect(gloo::rendezvous::Store& store, int rank, int size,
                                                   const gloo_connect_options& options = {})
{
    const std::string who = "gradsync::gloo_connect (rank " + std::to_string(rank) + " of " + std::to_string(size) + ")";
    if (size < 1 || rank < 0 || rank >= size)
        throw usage_error(who + ": rank must be in [0, size) and size at least 1");
    if (options.timeout.count() <= 0)
        throw usage_error(who + ": the timeout must be positive");
    try {
        gloo::transport::tcp::attr attr;
        attr.hostname = options.hostname;
        auto device = gloo::transport::tcp::CreateDevice(attr);
        gloo::rendezvous::PrefixStore prefixed(options.prefix, store);
        auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
        context->setTimeout(options.timeout);
        context->connectFullMesh(prefixed, device);
        // Return only once every rank is connected. Gloo's listening side accepts a peer's
        // connection in the background: a rank that returned first and destroyed its context
        // at once would close a socket a slower rank had still to take up, and fail that
        // rank's connecting with "Connection closed by peer".
        const std::string done = "connected/";
        prefixed.set(done + std::to_string(rank), {'1'});
        std::vector<std::string> everyone;
        for (int i = 0; i < size; ++i)
            everyone.push_back(done + std::to_string(i));
        prefixed.wait(everyone, options.timeout);
        return context;
    } catch (const std::exception& e) {
        throw communication_error(who + ": connecting through the store failed: " + e.what());
    }
}

} // namespace gradsync
