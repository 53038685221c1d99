/** murmur3's 32-bit finalizer: every input bit reaches every output bit. An unsigned 32-bit result. */
export function fmix32 (h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b)
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35)
  return (h ^ (h >>> 16)) >>> 0
}
