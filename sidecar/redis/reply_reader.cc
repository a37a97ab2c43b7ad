// hiredis's reader with reply object functions of our own: each reply is built in one arena that
// its root heads, so a reply of a hundred stream entries costs a handful of mallocs instead of
// hiredis's two or three per element (a node, its string, its element array), and freeing it is
// a walk over those few blocks instead of over the tree (issue 34: half of the batch path's
// instructions were malloc and free). The nodes stay hiredis's redisReply, so ReplyView reads
// them as before; the reader itself (framing, nesting depth, buffer, errors) is hiredis's.

#include <hiredis.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <new>

#include "sidecar/redis/reply.h"

namespace streamcar::redis {
namespace {

// A block after the first: the arena's blocks are a list, freed together.
struct Block {
  Block* next;
};

// The first block of a reply's arena begins with its root node, so that the root pointer that
// hiredis and ReplyPtr hold is the arena's address (pointer-interconvertible: standard layout,
// first member).
struct Arena {
  redisReply root;
  Block* blocks;
  char* cursor;
  char* end;
  size_t next_block;
};
static_assert(offsetof(Arena, root) == 0);

constexpr size_t kAlign = alignof(std::max_align_t);
// Room after the root in the first block when the root is an array: an XACK batch, a script's
// answer or a short read fits; a reply of stream entries grows into further blocks.
constexpr size_t kFirstArrayRoom = 1024;
constexpr size_t kSecondBlock = 4096;
// Blocks double up to this, staying under glibc's mmap threshold (128 KiB) so that a large
// reply reuses heap memory instead of mapping and unmapping pages.
constexpr size_t kMaxBlock = size_t{64} * 1024;
// The most elements one array may announce: 16 Mi (a 128 MiB block of slots, reserved, not
// touched), where streamcar's largest replies (a read of COUNT entries, a cluster's slot map)
// hold thousands.
constexpr size_t kMaxElements = size_t{1} << 24;

constexpr size_t RoundUp(size_t n) { return (n + kAlign - 1) & ~(kAlign - 1); }

Arena* NewArena(int type, size_t room) {
  const size_t head = RoundUp(sizeof(Arena));
  void* memory = std::malloc(head + room);
  if (memory == nullptr) return nullptr;
  auto* arena = new (memory) Arena{};
  arena->root.type = type;
  arena->cursor = static_cast<char*>(memory) + head;
  arena->end = arena->cursor + room;
  arena->next_block = kSecondBlock;
  return arena;
}

void* Allocate(Arena* arena, size_t bytes) {
  bytes = RoundUp(bytes);
  if (static_cast<size_t>(arena->end - arena->cursor) < bytes) {
    const size_t head = RoundUp(sizeof(Block));
    const size_t room = std::max(bytes, arena->next_block);
    void* memory = std::malloc(head + room);
    if (memory == nullptr) return nullptr;
    arena->blocks = new (memory) Block{arena->blocks};
    arena->cursor = static_cast<char*>(memory) + head;
    arena->end = arena->cursor + room;
    arena->next_block = std::min(arena->next_block * 2, kMaxBlock);
  }
  void* out = arena->cursor;
  arena->cursor += bytes;
  return out;
}

void FreeArena(void* root) {
  if (root == nullptr) return;
  auto* arena = static_cast<Arena*>(root);
  for (Block* block = arena->blocks; block != nullptr;) {
    Block* next = block->next;
    std::free(block);
    block = next;
  }
  std::free(arena);
}

// The root task's node (hiredis nests at most 7 deep, so the walk is short).
Arena* ArenaOf(const redisReadTask* task) {
  while (task->parent != nullptr) task = task->parent;
  return static_cast<Arena*>(task->obj);
}

// A node of `type` for `task`: the root opens a new arena with `room` bytes after it, any other
// node is allocated in its root's arena and linked into its parent array, as hiredis's own
// functions do (they too take the type of a nil or an integer from the function, not the task).
redisReply* NewNode(const redisReadTask* task, int type, size_t room) {
  if (task->parent == nullptr) {
    Arena* arena = NewArena(type, room);
    return arena == nullptr ? nullptr : &arena->root;
  }
  void* memory = Allocate(ArenaOf(task), sizeof(redisReply));
  if (memory == nullptr) return nullptr;
  auto* node = new (memory) redisReply{};
  node->type = type;
  static_cast<redisReply*>(task->parent->obj)->element[task->idx] = node;
  return node;
}

// A node whose own storage could not be had: hiredis records a root only when its function
// succeeds, so a root's arena that nothing will free is freed here (a child stays in its root's
// arena, which the reader frees with the half-read reply).
void* DropNode(const redisReadTask* task, redisReply* node) {
  if (task->parent == nullptr) FreeArena(node);
  return nullptr;
}

void* CreateString(const redisReadTask* task, char* str, size_t len) {
  redisReply* node = NewNode(task, task->type, RoundUp(len + 1));
  if (node == nullptr) return nullptr;
  Arena* arena = task->parent == nullptr ? reinterpret_cast<Arena*>(node) : ArenaOf(task);
  auto* copy = static_cast<char*>(Allocate(arena, len + 1));
  if (copy == nullptr) return DropNode(task, node);
  std::memcpy(copy, str, len);
  copy[len] = '\0';
  node->str = copy;
  node->len = len;
  return node;
}

void* CreateArray(const redisReadTask* task, int elements) {
  // The count is the server's word, not bytes received: a 12-byte `*2000000000` header must not
  // cost memory. So the slots are never written ahead (hiredis fills each as its element
  // arrives, and FreeArena never reads them: untouched pages of a large block cost no RSS), and a
  // count past kMaxElements, far above any reply streamcar asks for, is refused (hiredis reports
  // it as out of memory and the connection breaks). hiredis itself refuses a negative count other
  // than -1 (a nil array, passed to CreateNil); the check below only keeps the cast sound.
  if (elements < 0 || static_cast<size_t>(elements) > kMaxElements) return nullptr;
  const auto count = static_cast<size_t>(elements);
  redisReply* node = NewNode(task, REDIS_REPLY_ARRAY, kFirstArrayRoom);
  if (node == nullptr) return nullptr;
  if (count > 0) {
    Arena* arena = task->parent == nullptr ? reinterpret_cast<Arena*>(node) : ArenaOf(task);
    void* slots = Allocate(arena, count * sizeof(redisReply*));
    if (slots == nullptr) return DropNode(task, node);
    node->element = static_cast<redisReply**>(slots);
  }
  node->elements = count;
  return node;
}

void* CreateInteger(const redisReadTask* task, long long value) {  // NOLINT(google-runtime-int)
  redisReply* node = NewNode(task, REDIS_REPLY_INTEGER, 0);
  if (node != nullptr) node->integer = value;
  return node;
}

void* CreateNil(const redisReadTask* task) { return NewNode(task, REDIS_REPLY_NIL, 0); }

redisReplyObjectFunctions kArenaFunctions = {CreateString, CreateArray, CreateInteger, CreateNil,
                                             FreeArena};

}  // namespace

ReaderPtr NewReader() {
  return ReaderPtr(redisReaderCreateWithFunctions(&kArenaFunctions), &redisReaderFree);
}

void ReplyDeleter::operator()(redisReply* reply) const { FreeArena(reply); }

}  // namespace streamcar::redis
