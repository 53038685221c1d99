/**
 * A seeded generator of hostile request bodies for the Unix-socket protocol,
 * used by the fuzz test and by bench/fairness.ts. No dependencies: a small
 * msgpack writer that picks any width for every value (the server must accept
 * every width), and a PRNG (mulberry32), so a seed always gives the same
 * frames and a failure can be replayed.
 *
 * Three kinds of body, mixed:
 * - structured (50%): a well-formed msgpack map shaped like a request, with
 *   field values drawn from edge cases (integers at every width boundary,
 *   64-bit integers, floats, NaN, invalid UTF-8, binary, extension types
 *   including msgpackr's own BigInt (0x42) and timestamp (-1), nested maps and
 *   arrays, non-string map keys, unknown fields). Its `id`, when it wrote a
 *   valid one, is returned: the reply must carry it.
 * - mutated (35%): a structured body with a few bytes flipped, inserted,
 *   deleted or cut off.
 * - random (15%): random bytes.
 *
 * The frame header is always right, so the stream's framing survives.
 */

export class Rng {
  private s: number
  constructor (seed: number) {
    this.s = seed >>> 0
  }

  /** A uniform uint32. */
  next (): number {
    let t = (this.s = (this.s + 0x6d2b79f5) >>> 0)
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return (t ^ (t >>> 14)) >>> 0
  }

  /** An integer in [0, n). */
  int (n: number): number {
    return this.next() % n
  }

  chance (p: number): boolean {
    return this.next() < p * 0x1_0000_0000
  }

  pick<T> (xs: readonly T[]): T {
    return xs[this.int(xs.length)]
  }
}

export interface FuzzFrame {
  /** The whole frame: 4-byte length + body. */
  frame: Buffer
  /** The id the reply must carry (null: must be null), or undefined when the body was damaged on purpose. */
  id: number | null | undefined
  kind: 'structured' | 'mutated' | 'random'
}

const OPS = ['acquire', 'peek', 'batch', 'status', 'ping', 'launch', '', 'ACQUIRE']
const INTS = [0, 1, 2, 31, 127, 128, 255, 256, 1000, 32767, 65535, 65536, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1, 2 ** 32,
  2 ** 53 - 1, 2 ** 53, 2 ** 63, -1, -31, -32, -33, -128, -129, -32768, -(2 ** 31), -(2 ** 53), -(2 ** 63)]
const FLOATS = [0.5, -0.0, 1.5, 2.5e9, 1e300, -1e300, NaN, Infinity, -Infinity, 60000.5, 4294967295.0]
const KEY_BYTES: readonly Buffer[] = [
  'k', 'fz:a', 'fz:b', 'fz:' + 'x'.repeat(200), 'fz:' + 'y'.repeat(300), 'payments', 'signup:1.2.3.4', 'ключ', '鍵', '\u0000', '🔑'
].map(s => Buffer.from(s))
const BAD_UTF8: readonly Buffer[] = [
  [0x6b, 0x3a, 0xff], [0x6b, 0x3a, 0xfe], [0x6b, 0x3a, 0xc0], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf8, 0x88, 0x80, 0x80, 0x80], [0x80]
].map(b => Buffer.from(b))
/** Extension types: 0x42 is msgpackr's BigInt, -1 the msgpack timestamp, the rest msgpackr's and random ones. */
const EXT_TYPES = [0x42, -1, 0, 1, 0x65, 0x72, 0x74, 0x69, 0x73, 0x78, 127, -128]

/** A msgpack writer with a chosen width for everything. */
class W {
  buf = Buffer.allocUnsafe(256)
  len = 0

  private room (n: number): void {
    if (this.len + n <= this.buf.length) return
    const next = Buffer.allocUnsafe(Math.max(2 * this.buf.length, this.len + n))
    this.buf.copy(next, 0, 0, this.len)
    this.buf = next
  }

  byte (...xs: number[]): void {
    this.room(xs.length)
    for (const x of xs) this.buf[this.len++] = x & 0xff
  }

  be (v: number, bytes: number): void {
    this.room(bytes)
    for (let i = bytes - 1; i >= 0; i--) this.buf[this.len++] = Math.floor(v / 2 ** (8 * i)) & 0xff
  }

  raw (bytes: Uint8Array): void {
    this.room(bytes.length)
    this.buf.set(bytes, this.len)
    this.len += bytes.length
  }

  /** The body, as a frame: 4-byte length first. */
  frame (): Buffer {
    const f = Buffer.allocUnsafe(4 + this.len)
    f.writeUInt32BE(this.len, 0)
    this.buf.copy(f, 4, 0, this.len)
    return f
  }
}

function writeUint (w: W, r: Rng, v: number): void {
  // The shortest form, or any wider one.
  const forms: Array<() => void> = []
  if (v < 128) forms.push(() => w.byte(v))
  if (v < 256) forms.push(() => w.byte(0xcc, v))
  if (v < 65536) forms.push(() => { w.byte(0xcd); w.be(v, 2) })
  if (v < 2 ** 32) forms.push(() => { w.byte(0xce); w.be(v, 4) })
  forms.push(() => { w.byte(0xcf); writeBig(w, BigInt(v)) })
  if (v < 2 ** 63) forms.push(() => { w.byte(0xd3); writeBig(w, BigInt(v)) })
  ;(r.chance(0.6) ? forms[0] : r.pick(forms))()
}

function writeBig (w: W, v: bigint): void {
  const b = Buffer.alloc(8)
  b.writeBigUInt64BE(BigInt.asUintN(64, v))
  w.raw(b)
}

function writeInt (w: W, r: Rng, v: number): void {
  if (v >= 0) return writeUint(w, r, v)
  const forms: Array<() => void> = []
  if (v >= -32) forms.push(() => w.byte(0x100 + v))
  if (v >= -128) forms.push(() => w.byte(0xd0, 0x100 + v))
  if (v >= -32768) forms.push(() => { w.byte(0xd1); w.be(0x10000 + v, 2) })
  if (v >= -(2 ** 31)) forms.push(() => { w.byte(0xd2); w.be(2 ** 32 + v, 4) })
  forms.push(() => { w.byte(0xd3); writeBig(w, BigInt(v)) })
  ;(r.chance(0.6) ? forms[0] : r.pick(forms))()
}

function writeFloat (w: W, r: Rng, v: number): void {
  const b = Buffer.alloc(9)
  if (r.chance(0.5)) {
    b[0] = 0xca
    b.writeFloatBE(v, 1)
    w.raw(b.subarray(0, 5))
  } else {
    b[0] = 0xcb
    b.writeDoubleBE(v, 1)
    w.raw(b)
  }
}

function writeStr (w: W, r: Rng, bytes: Uint8Array): void {
  const n = bytes.length
  const forms: Array<() => void> = []
  if (n < 32) forms.push(() => w.byte(0xa0 | n))
  if (n < 256) forms.push(() => w.byte(0xd9, n))
  if (n < 65536) forms.push(() => { w.byte(0xda); w.be(n, 2) })
  forms.push(() => { w.byte(0xdb); w.be(n, 4) })
  ;(r.chance(0.7) ? forms[0] : r.pick(forms))()
  w.raw(bytes)
}

function writeExt (w: W, r: Rng): void {
  const type = r.pick(EXT_TYPES) & 0xff
  const fixed = [[0xd4, 1], [0xd5, 2], [0xd6, 4], [0xd7, 8], [0xd8, 16]] as const
  if (r.chance(0.7)) {
    const [b, n] = r.pick(fixed)
    w.byte(b, type)
    for (let i = 0; i < n; i++) w.byte(r.int(256))
  } else {
    const n = r.pick([0, 3, 12, 40])
    const t = r.int(3)
    if (t === 0) w.byte(0xc7, n, type)
    else if (t === 1) { w.byte(0xc8); w.be(n, 2); w.byte(type) } else { w.byte(0xc9); w.be(n, 4); w.byte(type) }
    for (let i = 0; i < n; i++) w.byte(r.int(256))
  }
}

function writeMapHeader (w: W, r: Rng, n: number): void {
  const t = n < 16 && r.chance(0.7) ? 0 : r.int(2) + 1
  if (t === 0) w.byte(0x80 | n)
  else if (t === 1) { w.byte(0xde); w.be(n, 2) } else { w.byte(0xdf); w.be(n, 4) }
}

function writeArrayHeader (w: W, r: Rng, n: number): void {
  const t = n < 16 && r.chance(0.7) ? 0 : r.int(2) + 1
  if (t === 0) w.byte(0x90 | n)
  else if (t === 1) { w.byte(0xdc); w.be(n, 2) } else { w.byte(0xdd); w.be(n, 4) }
}

/** Any value, weighted towards what a field would plausibly hold and what breaks decoders. */
function writeValue (w: W, r: Rng, depth: number): void {
  switch (r.int(depth > 3 ? 9 : 11)) {
    case 0: writeInt(w, r, r.pick(INTS)); return
    case 1: writeFloat(w, r, r.pick(FLOATS)); return
    case 2: writeStr(w, r, r.pick(KEY_BYTES)); return
    case 3: writeStr(w, r, r.pick(BAD_UTF8)); return
    case 4: w.byte(r.pick([0xc0, 0xc2, 0xc3])); return
    case 5: writeExt(w, r); return
    case 6: { // binary
      const n = r.int(20)
      w.byte(0xc4, n)
      for (let i = 0; i < n; i++) w.byte(r.int(256))
      return
    }
    case 7: writeInt(w, r, r.int(100)); return
    case 8: writeStr(w, r, Buffer.from(r.pick(OPS))); return
    case 9: {
      const n = r.int(4)
      writeArrayHeader(w, r, n)
      for (let i = 0; i < n; i++) writeValue(w, r, depth + 1)
      return
    }
    default: {
      const n = r.int(4)
      writeMapHeader(w, r, n)
      for (let i = 0; i < n; i++) {
        if (r.chance(0.1)) writeValue(w, r, depth + 1) // a key that is not a string
        else writeStr(w, r, Buffer.from(r.pick(['key', 'count', 'x', 'id'])))
        writeValue(w, r, depth + 1)
      }
    }
  }
}

function writeItems (w: W, r: Rng): void {
  const n = r.chance(0.05) ? 1000 + r.int(20) : r.int(6)
  writeArrayHeader(w, r, n)
  for (let i = 0; i < n; i++) {
    if (r.chance(0.1)) { writeValue(w, r, 2); continue }
    const fields = r.int(3)
    writeMapHeader(w, r, fields)
    for (let f = 0; f < fields; f++) {
      const name = f === 0 ? 'key' : r.pick(['count', 'waitMs', 'other'])
      writeStr(w, r, Buffer.from(name))
      if (name === 'key') {
        const v = r.int(10)
        if (v < 6) writeStr(w, r, r.pick(KEY_BYTES))
        else if (v < 8) writeStr(w, r, r.pick(BAD_UTF8))
        else writeValue(w, r, 3)
      } else if (r.chance(0.6)) {
        writeInt(w, r, r.pick(INTS))
      } else {
        writeValue(w, r, 3)
      }
    }
  }
}

/**
 * A well-formed request-shaped map. Returns the id the reply must carry: the
 * frame's id when it wrote a valid one, null when it wrote no id field, and
 * undefined when it wrote some other value as the id (which may or may not
 * happen to be a valid id).
 */
function structured (w: W, r: Rng, id: number): number | null | undefined {
  const fields: Array<[string, () => number | undefined]> = []
  if (r.chance(0.92)) {
    fields.push(['id', () => {
      if (r.chance(0.85)) { writeUint(w, r, id); return id }
      writeValue(w, r, 1)
      return undefined
    }])
  }
  const some = (write: () => void) => (): undefined => { write(); return undefined }
  if (r.chance(0.95)) fields.push(['op', some(() => { if (r.chance(0.85)) writeStr(w, r, Buffer.from(r.pick(OPS))); else writeValue(w, r, 1) })])
  if (r.chance(0.8)) {
    fields.push(['key', some(() => {
      const v = r.int(10)
      if (v < 6) writeStr(w, r, r.pick(KEY_BYTES))
      else if (v < 8) writeStr(w, r, r.pick(BAD_UTF8))
      else writeValue(w, r, 1)
    })])
  }
  if (r.chance(0.5)) fields.push(['count', some(() => { if (r.chance(0.5)) writeInt(w, r, r.pick(INTS)); else writeValue(w, r, 1) })])
  if (r.chance(0.3)) fields.push(['waitMs', some(() => { if (r.chance(0.5)) writeInt(w, r, r.pick(INTS)); else writeValue(w, r, 1) })])
  if (r.chance(0.3)) fields.push(['items', some(() => { if (r.chance(0.8)) writeItems(w, r); else writeValue(w, r, 1) })])
  for (let i = r.int(3); i > 0; i--) fields.push([r.pick(['extra', '__proto__', 'constructor', 'ID', 'Op']), some(() => writeValue(w, r, 1))])
  // Shuffle: fields come in any order.
  for (let i = fields.length - 1; i > 0; i--) {
    const j = r.int(i + 1)
    ;[fields[i], fields[j]] = [fields[j], fields[i]]
  }
  const nonString = r.chance(0.05)
  writeMapHeader(w, r, fields.length + (nonString ? 1 : 0))
  if (nonString) { writeInt(w, r, r.int(100)); writeValue(w, r, 1) }
  let expected: number | null | undefined = null
  for (const [name, write] of fields) {
    writeStr(w, r, Buffer.from(name))
    const got = write()
    if (name === 'id') expected = got
  }
  return expected
}

function frameOf (body: Uint8Array): Buffer {
  const f = Buffer.allocUnsafe(4 + body.length)
  f.writeUInt32BE(body.length, 0)
  f.set(body, 4)
  return f
}

/** Frame number `index` of the stream for `seed`. `id` for structured frames is `index` mod 2^32. */
export function fuzzFrame (r: Rng, index: number): FuzzFrame {
  const pick = r.int(100)
  const id = index % 2 ** 32
  if (pick < 15) {
    const n = r.int(48)
    const body = Buffer.allocUnsafe(n)
    for (let i = 0; i < n; i++) body[i] = r.chance(0.3) ? r.pick([0x80, 0x81, 0x82, 0xa2, 0xc1, 0xd4, 0xde, 0xdf, 0xdd, 0xff]) : r.int(256)
    return { frame: frameOf(body), id: undefined, kind: 'random' }
  }
  const w = new W()
  const expected = structured(w, r, id)
  if (pick >= 50) return { frame: w.frame(), id: expected, kind: 'structured' }
  let body = Buffer.from(w.buf.subarray(0, w.len))
  for (let m = 1 + r.int(4); m > 0 && body.length > 0; m--) {
    const at = r.int(body.length)
    switch (r.int(5)) {
      case 0: body[at] ^= 1 << r.int(8); break
      case 1: body[at] = r.int(256); break
      case 2: body = Buffer.concat([body.subarray(0, at), Buffer.from([r.int(256)]), body.subarray(at)]); break
      case 3: body = Buffer.concat([body.subarray(0, at), body.subarray(at + 1)]); break
      default: body = body.subarray(0, at)
    }
  }
  return { frame: frameOf(body), id: undefined, kind: 'mutated' }
}

/** `count` frames for `seed`, as an iterator (frames are made on demand). */
export function * fuzzFrames (seed: number, count: number): Generator<FuzzFrame> {
  const r = new Rng(seed)
  for (let i = 0; i < count; i++) yield fuzzFrame(r, i)
}
