# Sourced by the set-up scripts: installs missing Debian packages when run as root,
# otherwise prints the one apt-get line to run and stops.
need_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "gradsync needs these Debian packages; run:" >&2
    echo "  sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

build_packages=(cmake g++ make)
# data_parallel and its Fashion-MNIST example (scripts/torch_study.sh).
torch_packages=(libtorch-dev zlib1g-dev dataset-fashion-mnist)
# The Python package (python/, gradsync.torch) and its tests: Debian's torch for /usr/bin/python3,
# pybind11, pytest.
python_packages=(python3-torch python3-pybind11 pybind11-dev python3-pytest)
# The test tiers: Open MPI and Boost.MPI; MPICH for the cross-check; clang with its runtime for
# libFuzzer; Thrust (OpenMP back end) for the device kernels on the CPU; libtorch, zlib and
# Fashion-MNIST for data_parallel and its example, Gloo's headers for the ProcessGroupGloo
# benchmark and the Python backend; Doxygen for the API reference; iproute2 (ip, tc) for the
# test cluster's hosts; SimGrid's SMPI (smpicxx, smpirun) for the scale study's smoke test; Redis
# (the server, and hiredis for the client) for the Redis store.
test_packages=("${build_packages[@]}" catch2 libbenchmark-dev openmpi-bin libopenmpi-dev libboost-mpi-dev
  mpich libmpich-dev clang libclang-rt-14-dev libthrust-dev "${torch_packages[@]}" libgloo-dev doxygen iproute2
  "${python_packages[@]}" libsimgrid-dev redis-server libhiredis-dev)
