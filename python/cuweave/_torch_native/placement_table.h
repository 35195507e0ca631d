/* cuweave's placement table: what a hook built apart from cuweave calls to have the active weave place another
   library's operation (Note [PyTorch's operators placed from its dispatcher] in cuweave/_torch_native/__init__.py).
   Plain C, so that the hook and cuweave share no C++ ABI: cuweave's _core hands it over in a capsule named
   CUWEAVE_PLACEMENT_TABLE_NAME (cuweave._core.weave.placement_table()). Every function is for the calling thread,
   needs no GIL, and throws nothing. */
#ifndef CUWEAVE_PLACEMENT_TABLE_H
#define CUWEAVE_PLACEMENT_TABLE_H

#include <stddef.h>
#include <stdint.h>

#define CUWEAVE_PLACEMENT_TABLE_NAME "cuweave.placement_table"
#define CUWEAVE_PLACEMENT_TABLE_VERSION 1

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
  int captured;            /* the stream takes part in a capture: what the operation touches must live as long as
                              its graph (keep), and the stream's own order is the replay's */
  void* stream;            /* cuweave's stream, for allocated() and keep(); valid until the weave ends */
} cuweave_placed;

typedef struct cuweave_placement_table {
  uint32_t version; /* CUWEAVE_PLACEMENT_TABLE_VERSION */
  /* The device of the current stream when a weave is active on this thread, the stream-race sanitizer is off and
     the current stream takes part in no capture (while the sanitizer is on, or under a capture, the library's
     operators go through its Python hooks); -1 when the hook has nothing to place. */
  int (*placing_device)(void);
  /* Places an operation touching `count` ranges in the active weave, after the waits it needs. 0: placed;
     -1: it failed, and the failure is raised as the weave ends (cuweave._core.weave.raise_failed_placement). */
  int (*place)(const cuweave_range* ranges, size_t count, cuweave_placed* placed);
  /* The library's allocator handed out [begin, begin + bytes) for the operation just placed on `stream` (its new
     output): later users on other streams wait for it. 0, or -1 as place(). */
  int (*allocated)(uintptr_t begin, size_t bytes, void* stream);
  /* `object` lives as long as the graph that `stream`'s capture makes: release(object) runs once that graph and its
     last replay are done (on any thread, without the GIL). 0, or -1 as place() (release(object) then ran). */
  int (*keep)(void* stream, void* object, void (*release)(void* object));
} cuweave_placement_table;

#ifdef __cplusplus
}
#endif

#endif
