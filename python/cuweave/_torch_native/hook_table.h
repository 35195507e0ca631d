/* cuweave's hook table: what a hook built apart from cuweave calls to have the active weave place another library's
   operation, and the stream-race sanitizer check it (Note [PyTorch's operators placed from its dispatcher] and Note
   [PyTorch's operators checked from its dispatcher] in cuweave/_torch_native/__init__.py). Plain C, so that the hook
   and cuweave share no C++ ABI: cuweave's _core hands it over in a capsule named CUWEAVE_HOOK_TABLE_NAME
   (cuweave._core.hook_table()). Every function is for the calling thread, may be called with or without the GIL, and
   throws nothing. */
#ifndef CUWEAVE_HOOK_TABLE_H
#define CUWEAVE_HOOK_TABLE_H

#include <stddef.h>
#include <stdint.h>

#define CUWEAVE_HOOK_TABLE_NAME "cuweave.hook_table"
#define CUWEAVE_HOOK_TABLE_VERSION 5

/* The hook's jobs on the calling thread now (jobs()). */
#define CUWEAVE_HOOK_PLACES 1 /* a weave is active on this thread and the current stream takes part in no capture */
#define CUWEAVE_HOOK_CHECKS 2 /* the stream-race sanitizer is on */

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes [begin, begin + bytes) an operation reads, or writes where `writes` is nonzero. */
typedef struct cuweave_range {
  uintptr_t begin;
  size_t bytes;
  int writes;
} cuweave_range;

/* Where the weave placed an operation. */
typedef struct cuweave_placed {
  uintptr_t stream_handle; /* the CUDA stream to queue it on (0: the device's legacy default stream) */
  int device;              /* that stream's device */
  void* stream;            /* cuweave's stream, for the calls below; valid until the weave ends */
} cuweave_placed;

/* The stream an operation is queued on, for the sanitizer. */
typedef struct cuweave_stream {
  void* placed;     /* cuweave's stream where the weave placed it (cuweave_placed.stream); null: the library's own: */
  uintptr_t handle; /* its CUDA handle (0: the legacy default stream) */
  int device;       /* its device */
  int lasting;      /* the library never destroys it (a stream of its own pools): cuweave may keep its adoption */
} cuweave_stream;

/* A failure returns -1 and is kept: raised as the weave or the sanitized block ends (cuweave._core.raise_hook_failure).
   A race the sanitizer finds returns 1 and is kept on the calling thread until raise_found(), which the hook calls as
   the library's call ends: then it is raised in Python, in the thread `raise_in` names (a Python thread ident; 0: the
   calling thread) when that thread next runs Python code, since nothing can be raised through the library. Kept
   until then, not raised at once: Python code the library runs inside its call (PyTorch's GPU trace callbacks) would
   meet the error, and the library would log and drop it (on_race="warn": its warning, raised only where warnings are
   made errors). */
typedef struct cuweave_hook_table {
  uint32_t version; /* CUWEAVE_HOOK_TABLE_VERSION */
  /* CUWEAVE_HOOK_PLACES and CUWEAVE_HOOK_CHECKS bits, or 0; `*device`: the current stream's device where it places. */
  int (*jobs)(int* device);
  /* Places an operation touching `count` ranges in the active weave, after the waits it needs. 0, or -1. */
  int (*place)(const cuweave_range* ranges, size_t count, cuweave_placed* placed);
  /* The library's allocator handed out [begin, begin + bytes) for the operation just placed on `stream` (its new
     output): later users on other streams wait for it. 0, or -1. */
  int (*allocated)(uintptr_t begin, size_t bytes, void* stream);
  /* Checks an operation named `name` (UTF-8) touching `count` ranges, queued on `stream` now. 0, 1 or -1. */
  int (*check)(const char* name, const cuweave_range* ranges, size_t count, const cuweave_stream* stream,
               unsigned long raise_in);
  /* The library's allocator handed out [begin, begin + bytes) for work on `stream`: its earlier users must be
     ordered before that work (the sanitizer's reuse check). 0, 1 or -1. */
  int (*handed_out)(uintptr_t begin, size_t bytes, const cuweave_stream* stream, unsigned long raise_in);
  /* The block handed out at `block` is used on `stream` too, recorded with its allocator (record_stream). 0, or -1. */
  int (*stream_recorded)(uintptr_t block, const cuweave_stream* stream);
  /* Checks what the host reads and writes now through the library: pinned host memory that copies also touch.
     0, 1 or -1. */
  int (*check_host)(const char* name, const cuweave_range* ranges, size_t count, unsigned long raise_in);
  /* The library's pinned allocator handed out [begin, begin + bytes) once every earlier use was done. 0, or -1. */
  int (*host_handed_out)(uintptr_t begin, size_t bytes);
  /* Raises the first race found on this thread since the last call, as above (none found: nothing). 0, or -1. */
  int (*raise_found)(void);
  /* Takes back a race raise_found() set to be raised in the calling thread that Python has not raised yet, and keeps
     it for the next raise_found(). 1 if one was taken back, 0, or -1. The hook calls it as the library's next call
     starts: Python looks for the error after a function call returns, not after an operator's syntax (a + b,
     x[i] = v) nor at a del, so it may still be pending there, and the library's Python code would meet it. */
  int (*hold_raised)(void);
  /* The host waited for `stream`'s work queued so far, told again where the library's call synchronized inside,
     after work that the hook tells only as the call ends (a blocking copy's new output). 0, or -1. */
  int (*stream_synchronized)(const cuweave_stream* stream);
} cuweave_hook_table;

#ifdef __cplusplus
}
#endif

#endif
