// gloo_store: the c10d::Store torch hands a backend (TCPStore, FileStore, HashStore behind
// a PrefixStore), seen as the gloo::rendezvous::Store gloo_connect reads addresses from. Every
// rendezvous torch knows (env://, tcp://, file://, torchrun) thus serves gradsync's Gloo
// transport unchanged.
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include <gloo/rendezvous/store.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace gradsync::python {

class gloo_store final : public gloo::rendezvous::Store {
public:
    explicit gloo_store(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

    void set(const std::string& key, const std::vector<char>& data) override
    {
        store_->set(key, std::vector<std::uint8_t>(data.begin(), data.end()));
    }

    std::vector<char> get(const std::string& key) override
    {
        const std::vector<std::uint8_t> value = store_->get(key);
        return {value.begin(), value.end()};
    }

    void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }

    void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override
    {
        store_->wait(keys, timeout);
    }

private:
    c10::intrusive_ptr<c10d::Store> store_;
};

} // namespace gradsync::python
