/**
 * A gossip's `rd`: one short digest of its sender's rules (name -> hash) and
 * cluster hash (`cfg`), sent instead of both when they are as the sender
 * last sent them in full.
 *
 * Why. Every gossip carried the sender's whole rule map and cluster hash,
 * random hex that deflate cannot shrink: at keys100 with every node a seed
 * of 200, `rules` and `cfg` were 32 of a gossip's 271 bytes deflated, and
 * every node receives 199 peers' gossips four times a second. They change
 * only with a reload or a new cluster file.
 *
 * When. A gossip carries them in full on the first message of every full
 * sync (every `fullSyncEvery` gossips, and at once for a peer that is new or
 * restarted, and after a rule change) and in the RULES_REPEATS gossips
 * after a rule change or a start; otherwise `rd` (gossip-schedule.ts
 * `rulesDue`). A receiver computes the digest of what it last read in full
 * from that incarnation (Peers.observe) and takes a gossip with `rd` only if
 * the two match; otherwise it drops the gossip whole, as from a node whose
 * rules and cluster it does not know (intake.ts): its lines would be
 * labelled with rules it never read. The next full message (at most
 * `fullSyncEvery` gossips away) settles it.
 *
 * 64 bits of SHA-256, as 8 bytes (`bin8`, 10 bytes with its header): a
 * change of rules that kept the digest is a 2^-64 chance, where a wrong
 * match would label lines with rules they were not said under.
 */
import { createHash } from 'node:crypto'

/** Gossips after a rule change (or a start) that carry the rules in full, beside the full syncs' first messages. */
export const RULES_REPEATS = 4

/** The digest's bytes on the wire. */
export const DIGEST_BYTES = 8

export function rulesDigest (cfg: string, rules: Readonly<Record<string, string>>): Uint8Array {
  const h = createHash('sha256').update(cfg)
  for (const name of Object.keys(rules).sort()) h.update(`\n${name}\u0000${rules[name]}`)
  return new Uint8Array(h.digest().subarray(0, DIGEST_BYTES))
}

/** A digest as a peer's entry keeps it (comparable with ===). */
export function digestText (d: Uint8Array): string {
  return Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('hex')
}
