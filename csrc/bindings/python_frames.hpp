// Note [Call sites without frame objects]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A call site is the innermost Python frame outside cuweave's plumbing, asked for at each sanitized or traced
// operation. Since 3.11 the interpreter keeps its frames in a structure of its own and makes a frame object only
// when one is asked for: walking them through PyEval_GetFrame and PyFrame_GetBack makes an object (an allocation
// and its release) for each frame passed, a large part of what finding a call site costs. On 3.11 and 3.12 the walk
// reads the interpreter's frames where they lie instead (their layout is fixed within a minor version, and the
// module is built for one); other versions walk frame objects, as Python's own tools do.
#pragma once

#include "bindings/pybind.hpp"

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030D0000
#define CUWEAVE_INTERPRETER_FRAMES 1
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE
#define CUWEAVE_DEFINED_PY_BUILD_CORE
#endif
#include <internal/pycore_frame.h>
#ifdef CUWEAVE_DEFINED_PY_BUILD_CORE
#undef Py_BUILD_CORE
#undef CUWEAVE_DEFINED_PY_BUILD_CORE
#endif
#else
#define CUWEAVE_INTERPRETER_FRAMES 0
#include <frameobject.h>
#endif

namespace cuweave::bindings {

// A thread's Python frames, innermost first, walked under the GIL. The code objects it hands out are borrowed
// from frames that outlive the walk (the caller holds the GIL throughout).
class PythonFrames {
 public:
  // The calling thread's frames.
  PythonFrames() : PythonFrames(PyThreadState_Get()) {}
  explicit PythonFrames(PyThreadState* thread) {
#if CUWEAVE_INTERPRETER_FRAMES
    frame_ = thread->cframe->current_frame;
    skip_hidden();
#else
    frame_ = PyThreadState_GetFrame(thread);  // new reference, or null
    take_code();
#endif
  }
  PythonFrames(const PythonFrames&) = delete;
  PythonFrames& operator=(const PythonFrames&) = delete;
  ~PythonFrames() {
#if !CUWEAVE_INTERPRETER_FRAMES
    Py_XDECREF(code_);
    Py_XDECREF(frame_);
#endif
  }

  bool done() const { return frame_ == nullptr; }

  // The frame's code (borrowed).
  PyCodeObject* code() const {
#if CUWEAVE_INTERPRETER_FRAMES
    return frame_->f_code;
#else
    return code_;
#endif
  }

  // Where in its code the frame is: an instruction offset where Python keeps one (free to read), else the line.
  int position() const {
#if CUWEAVE_INTERPRETER_FRAMES
    return _PyInterpreterFrame_LASTI(frame_);
#elif PY_VERSION_HEX >= 0x030B0000
    return PyFrame_GetLasti(frame_);
#else
    return PyFrame_GetLineNumber(frame_);
#endif
  }

  // The frame's line (scans the code's line table).
  int line() const {
#if CUWEAVE_INTERPRETER_FRAMES
    return PyCode_Addr2Line(frame_->f_code, position() * static_cast<int>(sizeof(_Py_CODEUNIT)));
#else
    return PyFrame_GetLineNumber(frame_);
#endif
  }

  // On to the caller's frame.
  void next() {
#if CUWEAVE_INTERPRETER_FRAMES
    frame_ = frame_->previous;
    skip_hidden();
#else
    PyFrameObject* back = PyFrame_GetBack(frame_);  // new reference, or null
    Py_DECREF(frame_);
    frame_ = back;
    take_code();
#endif
  }

 private:
#if CUWEAVE_INTERPRETER_FRAMES
  // Frames with no place in the user's code: those a C call pushes (3.12), and those not yet started.
  void skip_hidden() {
    while (frame_ != nullptr) {
#if PY_VERSION_HEX >= 0x030C0000
      if (frame_->owner == FRAME_OWNED_BY_CSTACK) {
        frame_ = frame_->previous;
        continue;
      }
#endif
      if (!_PyFrame_IsIncomplete(frame_)) return;
      frame_ = frame_->previous;
    }
  }
  _PyInterpreterFrame* frame_ = nullptr;
#else
  void take_code() {
    Py_XDECREF(code_);
    code_ = frame_ != nullptr ? PyFrame_GetCode(frame_) : nullptr;  // new reference
  }
  PyFrameObject* frame_ = nullptr;
  PyCodeObject* code_ = nullptr;
#endif
};

}  // namespace cuweave::bindings
