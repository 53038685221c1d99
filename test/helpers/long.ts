/**
 * `npm test` against `npm run test:long` (issue 44: `npm test` in 4 minutes on
 * an idle 2-core machine). A seeded sweep runs a few of its seeds in `npm
 * test` and all of them in `npm run test:long` (QUOTAD_TEST_LONG=1), and the
 * whole-file sweeps named `*.long.test.ts` run only there (ava's `files`
 * leaves them out of `npm test`). The counts on each side are listed in
 * bench/README.md, "Seed counts", so nothing is dropped silently.
 */
export const LONG = process.env.QUOTAD_TEST_LONG === '1'

/** `quick` in `npm test`, `long` in `npm run test:long`. */
export function sweep<T> (quick: T, long: T): T {
  return LONG ? long : quick
}
