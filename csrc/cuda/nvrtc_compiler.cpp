#include "cuda/nvrtc_compiler.hpp"

#include <dlfcn.h>
#include <link.h>
#include <nvrtc.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include "cuda/optional_library.hpp"
#include "cuweave/errors.hpp"

namespace cuweave::cuda {

namespace {

struct Nvrtc {
  decltype(&nvrtcCreateProgram) create_program;
  decltype(&nvrtcDestroyProgram) destroy_program;
  decltype(&nvrtcCompileProgram) compile_program;
  decltype(&nvrtcGetProgramLogSize) log_size;
  decltype(&nvrtcGetProgramLog) log;
  decltype(&nvrtcGetCUBINSize) cubin_size;
  decltype(&nvrtcGetCUBIN) cubin;
  decltype(&nvrtcAddNameExpression) add_name_expression;
  decltype(&nvrtcGetLoweredName) lowered_name;
  decltype(&nvrtcGetErrorString) error_string;
};

// NVRTC 13 opens its builtins (libnvrtc-builtins.so.13.<minor>) by file name, and libnvrtc has no $ORIGIN search
// path: loaded from NVIDIA's wheel (site-packages/nvidia/cu13/lib), it would find no builtins on a machine without
// a toolkit, or a system toolkit's of another version. Opening the builtins beside the libnvrtc that was loaded,
// first, makes that file name resolve to them (as torch and cuda.pathfinder do).
void open_builtins_beside(void* library) {
  link_map* map = nullptr;
  if (dlinfo(library, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) return;
  const std::string path = map->l_name;
  const std::size_t slash = path.rfind('/');
  auto version = reinterpret_cast<nvrtcResult (*)(int*, int*)>(dlsym(library, "nvrtcVersion"));
  int major = 0;
  int minor = 0;
  if (slash == std::string::npos || version == nullptr || version(&major, &minor) != NVRTC_SUCCESS) return;
  const std::string builtins = path.substr(0, slash + 1) + "libnvrtc-builtins.so." + std::to_string(major) + "." +
                               std::to_string(minor);
  dlopen(builtins.c_str(), RTLD_NOW | RTLD_LOCAL);  // absent beside it: NVRTC searches as usual
}

const Nvrtc& nvrtc() {
  static std::once_flag once;
  static Nvrtc* loaded = nullptr;  // leaked: used until the process ends
  std::call_once(once, [] {
    const std::string site = site_packages();
    std::vector<std::string> candidates{"libnvrtc.so.13", "libnvrtc.so", site + "/nvidia/cu13/lib/libnvrtc.so.13"};
    if (const char* home = std::getenv("CUDA_HOME")) candidates.push_back(std::string(home) + "/lib64/libnvrtc.so.13");
    candidates.insert(candidates.end(), {"/usr/local/cuda/lib64/libnvrtc.so.13", "/usr/local/cuda/lib64/libnvrtc.so"});
    void* library = load_optional({"NVRTC", "CUWEAVE_NVRTC", "libnvrtc.so.13", "runtime compilation (cuweave.compile)",
                                   "in the CUDA toolkit or the nvidia-cuda-nvrtc package",
                                   "pip install nvidia-cuda-nvrtc"},
                                  candidates);
    open_builtins_beside(library);
    auto* table = new Nvrtc;
    bind(library, "nvrtcCreateProgram", table->create_program, "NVRTC");
    bind(library, "nvrtcDestroyProgram", table->destroy_program, "NVRTC");
    bind(library, "nvrtcCompileProgram", table->compile_program, "NVRTC");
    bind(library, "nvrtcGetProgramLogSize", table->log_size, "NVRTC");
    bind(library, "nvrtcGetProgramLog", table->log, "NVRTC");
    bind(library, "nvrtcGetCUBINSize", table->cubin_size, "NVRTC");
    bind(library, "nvrtcGetCUBIN", table->cubin, "NVRTC");
    bind(library, "nvrtcAddNameExpression", table->add_name_expression, "NVRTC");
    bind(library, "nvrtcGetLoweredName", table->lowered_name, "NVRTC");
    bind(library, "nvrtcGetErrorString", table->error_string, "NVRTC");
    loaded = table;
  });
  return *loaded;
}

void check(const Nvrtc& api, nvrtcResult result, const char* call) {
  if (result != NVRTC_SUCCESS) {
    throw BackendError(call, static_cast<int>(result), api.error_string(result), "NVRTC failed", __FILE__, __LINE__);
  }
}

// Owns an nvrtcProgram.
class Program {
 public:
  Program(const Nvrtc& api, const std::string& source) : api_(api) {
    check(api, api.create_program(&program_, source.c_str(), "cuweave_kernel.cu", 0, nullptr, nullptr),
          "nvrtcCreateProgram");
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() { api_.destroy_program(&program_); }
  nvrtcProgram get() const noexcept { return program_; }

 private:
  const Nvrtc& api_;
  nvrtcProgram program_ = nullptr;
};

// NVRTC declares no device runtime functions, and a kernel that sets a conditional node's condition calls
// one, cudaGraphSetConditional, which the driver resolves when it loads the module (no device linking). So a
// source naming it gets its declaration, and #line keeps the compiler's line numbers the user's.
std::string with_declarations(const std::string& source) {
  if (source.find("cudaGraphSetConditional") == std::string::npos) return source;
  return "typedef unsigned long long cudaGraphConditionalHandle;\n"
         "extern \"C\" __device__ void cudaGraphSetConditional(cudaGraphConditionalHandle handle, unsigned int "
         "value);\n"
         "#line 1 \"cuweave_kernel.cu\"\n" +
         source;
}

}  // namespace

CompiledKernel nvrtc_compile(const std::string& source, const std::string& name_expression,
                             const std::vector<std::string>& options, int major, int minor) {
  const Nvrtc& api = nvrtc();
  Program program(api, with_declarations(source));
  check(api, api.add_name_expression(program.get(), name_expression.c_str()), "nvrtcAddNameExpression");
  const std::string architecture = "--gpu-architecture=sm_" + std::to_string(major) + std::to_string(minor);
  std::vector<std::string> all_options = options;
  bool has_architecture = false;
  bool has_standard = false;
  for (const std::string& option : options) {
    has_architecture |= option.rfind("--gpu-architecture", 0) == 0 || option.rfind("-arch", 0) == 0;
    has_standard |= option.rfind("--std", 0) == 0 || option.rfind("-std", 0) == 0;
  }
  if (!has_architecture) all_options.push_back(architecture);
  if (!has_standard) all_options.emplace_back("--std=c++17");
  std::vector<const char*> argv;
  for (const std::string& option : all_options) argv.push_back(option.c_str());
  const nvrtcResult compiled = api.compile_program(program.get(), static_cast<int>(argv.size()), argv.data());
  CompiledKernel result;
  std::size_t log_size = 0;
  check(api, api.log_size(program.get(), &log_size), "nvrtcGetProgramLogSize");
  result.log.resize(log_size);
  check(api, api.log(program.get(), result.log.data()), "nvrtcGetProgramLog");
  while (!result.log.empty() && (result.log.back() == '\0' || result.log.back() == '\n')) result.log.pop_back();
  if (compiled != NVRTC_SUCCESS) {
    throw CompileError("compiling kernel '" + name_expression + "' for sm_" + std::to_string(major) +
                           std::to_string(minor) + " failed (" + api.error_string(compiled) + "):",
                       result.log);
  }
  const char* lowered = nullptr;
  check(api, api.lowered_name(program.get(), name_expression.c_str(), &lowered), "nvrtcGetLoweredName");
  result.lowered_name = lowered;
  std::size_t size = 0;
  check(api, api.cubin_size(program.get(), &size), "nvrtcGetCUBINSize");
  result.binary.resize(size);
  check(api, api.cubin(program.get(), result.binary.data()), "nvrtcGetCUBIN");
  return result;
}

}  // namespace cuweave::cuda
