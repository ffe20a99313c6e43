/* The corecast trace record: 16 bytes, the unit of every trace file (after its header) and of
 * every buffer the C parts pass around -- the simulator (native/sim), the miss-rate curves
 * (native/mrc) and the QEMU capture plugin (native/qemu) include this one definition.
 * src/corecast/sim/native.py's RECORD_DTYPE and its KIND_*, BR_*, UNIT_*, UOP_* and REG_NONE
 * mirror it; tests/test_trace_header.py compiles this header and checks them against it. */
#ifndef CCTRACE_H
#define CCTRACE_H

#include <stdint.h>

/* One trace record (little-endian, no padding). */
typedef struct {
    uint64_t addr; /* fetch: pc; load/store/modify: data address; branch: pc; uop: packed */
    uint32_t aux;  /* branch: (int32) target - pc */
    uint16_t tid;  /* thread */
    uint8_t kind;  /* CC_K_* */
    uint8_t size;  /* bytes accessed; branch: CC_BR_* flags */
} cc_rec;

_Static_assert(sizeof(cc_rec) == 16, "a trace record is 16 bytes");

/* kind */
enum {
    CC_K_FETCH = 0,
    CC_K_LOAD = 1,
    CC_K_STORE = 2,
    CC_K_MODIFY = 3, /* read-modify-write of one location by one instruction */
    CC_K_BRANCH = 4,
    CC_K_MARKER = 5, /* a transaction starts here (addr: marker id) */
    CC_K_UOP = 6,    /* one uop of the last fetched instruction of this thread */
    CC_NKINDS = 7
};

/* size of a branch record: its flags */
enum { CC_BR_TAKEN = 1, CC_BR_COND = 2, CC_BR_INDIRECT = 4, CC_BR_CALL = 8, CC_BR_RET = 16 };

/* addr of a UOP record: bytes 0-3 source registers, 4-5 destination registers (CC_REG_NONE:
 * none), byte 6 unit class, byte 7 flags. */
enum { CC_UNIT_ALU = 0, CC_UNIT_LOAD = 1, CC_UNIT_STORE = 2, CC_UNIT_BRANCH = 3, CC_UNIT_FP = 4 };
#define CC_NUNITS 5
enum { CC_UOP_FIRST = 1, CC_UOP_PLACEHOLDER = 2 };
#define CC_REG_NONE 0xff

#endif
