// gradsync.torch._c10d: the backend's process group as a Python type derived from torch's
// ProcessGroup, which torch.distributed's creator function returns (gradsync/torch/__init__.py).
#include <chrono>
#include <cstddef>
#include <vector>

#include <Python.h>
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "planning.hpp"
#include "process_group.hpp"

namespace py = pybind11;

namespace {

// The holder torch gives its process groups and works: an intrusive_ptr that lets the GIL go
// before it drops its object, since a process group's destructor joins its thread, which may
// be finishing a call. Same layout as torch's, so either side can hold the other's objects.
template <class T>
class released_gil_ptr {
public:
    released_gil_ptr() = default;
    explicit released_gil_ptr(T* raw) : held_(c10::intrusive_ptr<T>::unsafe_reclaim_from_nonowning(raw)) {}
    released_gil_ptr(c10::intrusive_ptr<T> held) : held_(std::move(held)) {}
    released_gil_ptr(const released_gil_ptr&) = default;
    released_gil_ptr(released_gil_ptr&&) noexcept = default;
    released_gil_ptr& operator=(const released_gil_ptr&) = default;
    released_gil_ptr& operator=(released_gil_ptr&&) noexcept = default;

    ~released_gil_ptr()
    {
        if (held_ && PyGILState_Check()) {
            const py::gil_scoped_release released;
            held_.reset();
        } else {
            held_.reset();
        }
    }

    T* get() const noexcept { return held_.get(); }

private:
    c10::intrusive_ptr<T> held_;
};

} // namespace

PYBIND11_DECLARE_HOLDER_TYPE(T, released_gil_ptr<T>, true);

PYBIND11_MODULE(_c10d, m)
{
    using gradsync::python::process_group;
    m.doc() = "gradsync's torch.distributed backend (docs/python.md)";
    // torch's ProcessGroup and Work types must be registered before ours derive from them.
    py::module_::import("torch.distributed");

    py::class_<process_group, c10d::ProcessGroup, released_gil_ptr<process_group>>(m, "ProcessGroup")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout) {
                 return released_gil_ptr<process_group>(c10::make_intrusive<process_group>(store, rank, size, timeout));
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
             py::call_guard<py::gil_scoped_release>())
        .def("allreduce_adasum", &process_group::allreduce_adasum, py::arg("tensor"), py::arg("layers"),
             py::call_guard<py::gil_scoped_release>(),
             "Adasum of tensor, whose layers are the given element counts, in place, on the group's thread.");

    m.def("bucket_groups", &gradsync::python::bucket_groups, py::arg("params"), py::arg("cap_bytes"),
          py::arg("first_cap_bytes"), py::arg("bytes_per_element"),
          "DDP's buckets of these parameter counts as the planner's groups: ascending runs of layer indices, "
          "the last layers' first.");
    m.def("planned_groups", &gradsync::python::planned_groups, py::arg("params"), py::arg("backward_s"), py::arg("a"),
          py::arg("b"), py::arg("bytes_per_element"), py::arg("method"),
          "The planner's merged groups of a profile: ascending runs of layer indices, the last layers' first.");
    m.def("predicted_s", &gradsync::python::predicted_s, py::arg("params"), py::arg("backward_s"), py::arg("groups"),
          py::arg("a"), py::arg("b"), py::arg("bytes_per_element"),
          "The planner's predicted end of backward and communication for groups of a profile.");
}
