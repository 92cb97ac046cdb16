/*
 * crc32c.h - CRC-32C (Castagnoli), the checksum of every frame the storage writes.
 *
 * Guarantees: crc32c_update() computes the standard CRC-32C (reflected polynomial
 * 0x82F63B78, initial value and final xor 0xFFFFFFFF; crc32c of "123456789" is 0xE3069283).
 * It chains like zlib's crc32(): crc32c_update(crc32c_update(0, a), b) equals the CRC of a
 * followed by b, and a non-zero first argument acts as a seed. The result is the same on
 * every CPU: on x86-64 with SSE4.2 it uses the crc32 instruction, elsewhere an
 * 8-bytes-at-a-time table method; the choice is made once, thread-safely, on first use.
 *
 * CRC-32C rather than the zlib CRC-32 because its polynomial detects more error patterns
 * in the frame sizes the log uses, and because current CPUs compute it in hardware, which
 * keeps a recovery scan of hundreds of megabytes well under a second.
 */
#ifndef SPUR_CRC32C_H
#define SPUR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC of buf[0..len) continued from crc (0 for a fresh checksum). */
uint32_t crc32c_update(uint32_t crc, const void *buf, size_t len);

/* The portable table method alone, whatever the CPU: for tests that compare both paths. */
uint32_t crc32c_update_sw(uint32_t crc, const void *buf, size_t len);

/* 1 when crc32c_update() uses a hardware instruction on this CPU, else 0. */
int crc32c_hw_available(void);

#endif
