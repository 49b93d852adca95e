// The CPython extension `pool3d_pass.bindings.cpu._kernel`: hands the FFI
// handlers of handlers.cc to Python as PyCapsules for
// jax.ffi.register_ffi_target.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <thread>

#include "xla/ffi/api/c_api.h"

extern "C" XLA_FFI_Error* Pool3dMaxPooling3dBackward(XLA_FFI_CallFrame*);
extern "C" XLA_FFI_Error* Pool3dMaxPooling3dForward(XLA_FFI_CallFrame*);
extern "C" XLA_FFI_Error* Pool3dMaxPooling3dForwardOutput(XLA_FFI_CallFrame*);
extern "C" XLA_FFI_Error* Pool3dMaxPooling3dBackwardFromIndices(
    XLA_FFI_CallFrame*);
extern "C" XLA_FFI_Error* Pool3dMaxPooling3dBackwardFromInput(
    XLA_FFI_CallFrame*);

namespace {

PyObject* Capsule(XLA_FFI_Error* (*fn)(XLA_FFI_CallFrame*)) {
  return PyCapsule_New(reinterpret_cast<void*>(fn), nullptr, nullptr);
}

PyObject* Handlers(PyObject*, PyObject*) {
  PyObject* d = PyDict_New();
  if (d == nullptr) return nullptr;
  struct Entry {
    const char* kind;
    XLA_FFI_Error* (*fn)(XLA_FFI_CallFrame*);
  };
  const Entry entries[] = {
      {"backward", Pool3dMaxPooling3dBackward},
      {"forward", Pool3dMaxPooling3dForward},
      {"forward_output", Pool3dMaxPooling3dForwardOutput},
      {"backward_from_indices", Pool3dMaxPooling3dBackwardFromIndices},
      {"backward_from_input", Pool3dMaxPooling3dBackwardFromInput},
  };
  for (const Entry& e : entries) {
    PyObject* cap = Capsule(e.fn);
    if (cap == nullptr || PyDict_SetItemString(d, e.kind, cap) != 0) {
      Py_XDECREF(cap);
      Py_DECREF(d);
      return nullptr;
    }
    Py_DECREF(cap);
  }
  return d;
}

PyObject* HardwareThreads(PyObject*, PyObject*) {
  return PyLong_FromUnsignedLong(std::thread::hardware_concurrency());
}

PyMethodDef kMethods[] = {
    {"handlers", Handlers, METH_NOARGS,
     "{call kind: PyCapsule of its XLA FFI handler}, kinds as in "
     "pool3d_pass.contract.TARGETS."},
    {"hardware_threads", HardwareThreads, METH_NOARGS,
     "std::thread::hardware_concurrency() as the kernel sees it."},
    {nullptr, nullptr, 0, nullptr}};

struct PyModuleDef kModule = {
    PyModuleDef_HEAD_INIT, "_kernel",
    "XLA FFI CPU handlers of the pool3d custom calls.", -1, kMethods,
    nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__kernel(void) { return PyModule_Create(&kModule); }
