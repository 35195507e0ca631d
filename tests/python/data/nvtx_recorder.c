/* A minimal NVTX tool, as Nsight Systems is one: loaded through NVTX_INJECTION64_PATH, it writes each range
 * push and pop to the file NVTX_RECORDER_OUT names. test_tracing.py uses it to check that cuweave.range emits
 * NVTX ranges. */
#include <nvtx3/nvToolsExt.h>
#include <stdio.h>
#include <stdlib.h>

static FILE* out;

static int record_push(const char* message) {
  fprintf(out, "push %s\n", message);
  fflush(out);
  return 0;
}

static int record_pop(void) {
  fprintf(out, "pop\n");
  fflush(out);
  return 0;
}

int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table) {
  const NvtxExportTableCallbacks* callbacks = (const NvtxExportTableCallbacks*)get_export_table(NVTX_ETID_CALLBACKS);
  NvtxFunctionTable table = 0;
  unsigned int size = 0;
  const char* path = getenv("NVTX_RECORDER_OUT");
  if (callbacks == 0 || path == 0 || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size)) return 0;
  out = fopen(path, "w");
  if (out == 0) return 0;
  *table[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)record_push;
  *table[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)record_pop;
  return 1;
}
