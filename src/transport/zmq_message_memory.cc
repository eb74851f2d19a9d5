#include "transport/zmq_message_memory.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/block_cache.h"

namespace seqflow::transport {
namespace zmq_message_memory {
namespace {

// The blocks handed out, by address: release() must know a block from a
// pointer the C library made (libzmq frees both through the same import).
struct Blocks {
  std::mutex mutex;
  std::unordered_map<const void*, size_t> capacity;
};

Blocks& blocks() {
  // Never destroyed: libzmq may free messages during static destruction.
  static Blocks* made = [] {
    auto* state = new Blocks;
    // A fork while another thread holds the lock must not leave the child's copy locked.
    pthread_atfork([] { blocks().mutex.lock(); }, [] { blocks().mutex.unlock(); }, [] { blocks().mutex.unlock(); });
    return state;
  }();
  return *made;
}

// The block's capacity, taken out of the table; 0 when the cache did not hand it out.
size_t take_block(const void* pointer) {
  // Blocks are page-aligned; the C library's pointers (16 bytes past a chunk header) almost never are.
  if (pointer == nullptr || reinterpret_cast<uintptr_t>(pointer) % BlockCache::kPageAlignment != 0) return 0;
  Blocks& state = blocks();
  std::lock_guard lock(state.mutex);
  const auto it = state.capacity.find(pointer);
  if (it == state.capacity.end()) return 0;
  const size_t capacity = it->second;
  state.capacity.erase(it);
  return capacity;
}

}  // namespace

void* allocate(size_t size) {
  if (size < kLargeMessageBytes) return std::malloc(size);
  // More than any address space holds (a peer may write any frame length): malloc's answer, without asking.
  if (size > (SIZE_MAX >> 16)) {
    errno = ENOMEM;
    return nullptr;
  }
  size_t capacity = 0;
  std::byte* block = nullptr;
  try {
    block = BlockCache::instance().acquire(size, &capacity);
    Blocks& state = blocks();
    std::lock_guard lock(state.mutex);
    state.capacity.emplace(block, capacity);
  } catch (const std::bad_alloc&) {
    if (block != nullptr) BlockCache::instance().release(block, capacity);
    errno = ENOMEM;
    return nullptr;
  }
  return block;
}

void release(void* pointer) {
  const size_t capacity = take_block(pointer);
  if (capacity == 0) {
    std::free(pointer);
    return;
  }
  BlockCache::instance().release(static_cast<std::byte*>(pointer), capacity);
}

void* reallocate(void* pointer, size_t size) {
  if (!from_block_cache(pointer)) return std::realloc(pointer, size);
  size_t capacity = 0;
  {
    Blocks& state = blocks();
    std::lock_guard lock(state.mutex);
    capacity = state.capacity.at(pointer);
  }
  if (size <= capacity) return pointer;
  void* moved = allocate(size);
  if (moved == nullptr) return nullptr;  // realloc's contract: the old block stays
  std::memcpy(moved, pointer, capacity);
  release(pointer);
  return moved;
}

bool from_block_cache(const void* pointer) {
  if (pointer == nullptr || reinterpret_cast<uintptr_t>(pointer) % BlockCache::kPageAlignment != 0) return false;
  Blocks& state = blocks();
  std::lock_guard lock(state.mutex);
  return state.capacity.contains(pointer);
}

}  // namespace zmq_message_memory

namespace {

extern "C" void* seqflow_zmq_malloc(size_t size) noexcept { return zmq_message_memory::allocate(size); }
extern "C" void seqflow_zmq_free(void* pointer) noexcept { zmq_message_memory::release(pointer); }
extern "C" void* seqflow_zmq_realloc(void* pointer, size_t size) noexcept {
  return zmq_message_memory::reallocate(pointer, size);
}

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobalData = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobalData = R_AARCH64_GLOB_DAT;
#endif

#if defined(__x86_64__) || defined(__aarch64__)

// An import's slot: the word the library's calls of `symbol` jump through.
struct Slot {
  void** address;
  void* target;
};

// The loaded library's RELRO range (read-only once relocated), found by its load address.
struct ReadOnlyAfterRelocation {
  ElfW(Addr) load_address;
  uintptr_t begin = 0;
  uintptr_t end = 0;
};

int find_relro(dl_phdr_info* info, size_t /*size*/, void* found) {
  auto* range = static_cast<ReadOnlyAfterRelocation*>(found);
  if (info->dlpi_addr != range->load_address) return 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& header = info->dlpi_phdr[i];
    if (header.p_type != PT_GNU_RELRO) continue;
    range->begin = info->dlpi_addr + header.p_vaddr;
    range->end = range->begin + header.p_memsz;
  }
  return 1;
}

// The slots of libzmq's malloc, free and realloc imports, from its dynamic
// section (whose pointers the dynamic linker has relocated in place).
std::vector<Slot> import_slots(const link_map& library) {
  const ElfW(Addr) base = library.l_addr;
  const auto in_memory = [base](ElfW(Addr) value) { return value < base ? value + base : value; };
  const ElfW(Sym)* symbols = nullptr;
  const char* names = nullptr;
  const ElfW(Rela) * tables[2] = {nullptr, nullptr};  // DT_JMPREL (when RELA), DT_RELA
  size_t table_bytes[2] = {0, 0};
  bool plt_is_rela = false;
  for (const ElfW(Dyn)* entry = library.l_ld; entry->d_tag != DT_NULL; ++entry) {
    switch (entry->d_tag) {
      case DT_SYMTAB:
        symbols = reinterpret_cast<const ElfW(Sym)*>(in_memory(entry->d_un.d_ptr));
        break;
      case DT_STRTAB:
        names = reinterpret_cast<const char*>(in_memory(entry->d_un.d_ptr));
        break;
      case DT_JMPREL:
        tables[0] = reinterpret_cast<const ElfW(Rela)*>(in_memory(entry->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        table_bytes[0] = entry->d_un.d_val;
        break;
      case DT_PLTREL:
        plt_is_rela = entry->d_un.d_val == DT_RELA;
        break;
      case DT_RELA:
        tables[1] = reinterpret_cast<const ElfW(Rela)*>(in_memory(entry->d_un.d_ptr));
        break;
      case DT_RELASZ:
        table_bytes[1] = entry->d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (!plt_is_rela) tables[0] = nullptr;
  std::vector<Slot> slots;
  if (symbols == nullptr || names == nullptr) return slots;
  for (int t = 0; t < 2; ++t) {
    if (tables[t] == nullptr) continue;
    for (size_t i = 0; i < table_bytes[t] / sizeof(ElfW(Rela)); ++i) {
      const ElfW(Rela)& relocation = tables[t][i];
      const auto type = static_cast<uint32_t>(ELF64_R_TYPE(relocation.r_info));
      if (type != kJumpSlot && type != kGlobalData) continue;
      const std::string_view name = names + symbols[ELF64_R_SYM(relocation.r_info)].st_name;
      void* target = nullptr;
      if (name == "malloc") target = reinterpret_cast<void*>(&seqflow_zmq_malloc);
      if (name == "free") target = reinterpret_cast<void*>(&seqflow_zmq_free);
      if (name == "realloc") target = reinterpret_cast<void*>(&seqflow_zmq_realloc);
      if (target != nullptr) slots.push_back({reinterpret_cast<void**>(base + relocation.r_offset), target});
    }
  }
  return slots;
}

bool write_slot(const Slot& slot, const ReadOnlyAfterRelocation& relro) {
  // The dynamic linker protects RELRO's whole pages only: a last partial page stays writable (and holds data).
  const auto page_size = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t protected_begin = relro.begin & ~(page_size - 1);
  const uintptr_t protected_end = relro.end & ~(page_size - 1);
  const auto address = reinterpret_cast<uintptr_t>(slot.address);
  if (address < protected_begin || address >= protected_end) {
    __atomic_store_n(slot.address, slot.target, __ATOMIC_RELEASE);
    return true;
  }
  void* page = reinterpret_cast<void*>(address & ~(page_size - 1));
  if (mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot.address, slot.target, __ATOMIC_RELEASE);
  mprotect(page, page_size, PROT_READ);
  return true;
}

#if defined(__x86_64__)
// Calls each import once through its slot, so that the dynamic linker
// resolves every lazily bound one now: it writes a slot on the first call
// through it, and a libzmq thread making that first call while we write the
// slot would put the C library's function back. The calls pair up (the C
// library's malloc, realloc and free on one block).
void resolve_lazy_slots(const std::vector<Slot>& slots) {
  const auto is = [](const Slot& slot, auto* function) {
    return slot.target == reinterpret_cast<void*>(function) && *slot.address != nullptr;  // null: nothing to call
  };
  std::vector<void*> blocks;
  for (const Slot& slot : slots) {
    if (is(slot, &seqflow_zmq_malloc)) blocks.push_back(reinterpret_cast<void* (*)(size_t)>(*slot.address)(16));
  }
  for (const Slot& slot : slots) {
    if (!is(slot, &seqflow_zmq_realloc) || blocks.empty()) continue;
    void* grown = reinterpret_cast<void* (*)(void*, size_t)>(*slot.address)(blocks.back(), 64);
    if (grown != nullptr) blocks.back() = grown;
  }
  for (const Slot& slot : slots) {
    if (!is(slot, &seqflow_zmq_free)) continue;
    const auto free_through_slot = reinterpret_cast<void (*)(void*)>(*slot.address);
    for (void* block : blocks) free_through_slot(block);
    blocks.clear();
    free_through_slot(nullptr);  // a second free import resolves too
  }
}
#endif

bool redirect_libzmq_allocations() {
  Dl_info info{};
  link_map* library = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&zmq_msg_init_size), &info, reinterpret_cast<void**>(&library),
              RTLD_DL_LINKMAP) == 0 ||
      library == nullptr || library->l_name == nullptr || std::string_view(library->l_name).empty()) {
    return false;  // not found, or linked into the executable
  }
  // libzmq linked statically into the object that holds this code: its imports are ours too, and
  // redirecting them would send our own malloc calls back to us.
  Dl_info own_info{};
  link_map* own = nullptr;
  if (dladdr1(reinterpret_cast<void*>(&seqflow_zmq_malloc), &own_info, reinterpret_cast<void**>(&own),
              RTLD_DL_LINKMAP) == 0 ||
      own == library) {
    return false;
  }
  const std::vector<Slot> slots = import_slots(*library);
  const auto imports = [&slots](void* target) {
    return std::count_if(slots.begin(), slots.end(), [target](const Slot& slot) { return slot.target == target; });
  };
  // Blocks handed out by malloc must come back through our free: both or neither.
  if (imports(reinterpret_cast<void*>(&seqflow_zmq_malloc)) == 0 ||
      imports(reinterpret_cast<void*>(&seqflow_zmq_free)) == 0) {
    return false;
  }
  ReadOnlyAfterRelocation relro{library->l_addr};
  dl_iterate_phdr(find_relro, &relro);
#if defined(__x86_64__)
  resolve_lazy_slots(slots);
#else
  // AArch64: an unbound slot points at the library's PLT header, which expects the slot's address in x16:
  // it cannot be called from here. Only imports the dynamic linker bound already (BIND_NOW) are redirected.
  for (const Slot& slot : slots) {
    Dl_info slot_info{};
    link_map* owner = nullptr;
    if (dladdr1(*slot.address, &slot_info, reinterpret_cast<void**>(&owner), RTLD_DL_LINKMAP) != 0 &&
        owner == library) {
      return false;
    }
  }
#endif
  // free and realloc first: once malloc hands out a block, every way back knows it.
  std::vector<Slot> ordered = slots;
  std::stable_partition(ordered.begin(), ordered.end(),
                        [](const Slot& slot) { return slot.target != reinterpret_cast<void*>(&seqflow_zmq_malloc); });
  for (const Slot& slot : ordered) {
    if (!write_slot(slot, relro)) return false;
  }
  return true;
}

#else

bool redirect_libzmq_allocations() { return false; }

#endif

}  // namespace

bool keep_large_zmq_messages_in_block_cache() {
  static const bool redirected = redirect_libzmq_allocations();
  return redirected;
}

}  // namespace seqflow::transport
