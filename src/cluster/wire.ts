/**
 * The one msgpack codec of cluster messages (gossip, requests, journal
 * copies), in the daemon and the simulator alike, so the simulator counts
 * the bytes the daemon sends.
 *
 * Fractions go as 32-bit floats when their decimal digits survive the trip
 * (`DECIMAL_FIT`), and are read back rounded to those digits: a gossip's
 * rates and small holdings are sent with one decimal (gossip-builder.ts
 * `compact`), and each took 9 bytes as a float64 against 5 now (keys100 at
 * 50 nodes: most of a key line's 23 bytes are its numbers). A value
 * read back is the decimal that was sent; a fraction with more digits than
 * a float32 holds still goes as a float64, exact. Any msgpack reader reads
 * it; one without the rounding reads 2.4 as 2.4000000953674316.
 */
import { FLOAT32_OPTIONS, Packr } from 'msgpackr'

export const wire = new Packr({ useRecords: false, useFloat32: FLOAT32_OPTIONS.DECIMAL_FIT })
