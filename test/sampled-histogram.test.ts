/**
 * The decision histogram: its count is every decision, exactly, and only the
 * timing is sampled (each timed decision stands for the untimed ones).
 */
import test from 'ava'
import client from 'prom-client'
import { SampledHistogram } from '../src/http/sampled-histogram.js'

function make (feed: Array<{ times: number[], decisions: number }>): { r: client.Registry } {
  const r = new client.Registry()
  let i = 0
  const h: SampledHistogram = new SampledHistogram({
    name: 'h_seconds',
    help: 'test',
    buckets: [0.001, 0.01],
    registers: [r],
    collect: () => {
      const f = feed[i++]
      if (f !== undefined) h.takeIn(f.times, f.times.length, f.decisions)
    }
  })
  return { r }
}

const value = (text: string, series: string): number => Number(new RegExp(`^${series.replace(/[{}+"]/g, c => '\\' + c)} (\\S+)$`, 'm').exec(text)?.[1])

test('count and +Inf are the decisions; the buckets spread them as the samples fall, adding up exactly', async t => {
  // 2 decisions, 1 timed (the first after a scrape always is); then 35 decisions, 3 timed.
  const { r } = make([{ times: [0.0005], decisions: 2 }, { times: [0.0005, 0.005, 0.5], decisions: 35 }])
  const one = await r.metrics()
  t.is(value(one, 'h_seconds_count'), 2)
  t.is(value(one, 'h_seconds_bucket{le="+Inf"}'), 2)
  t.is(value(one, 'h_seconds_bucket{le="0.001"}'), 2)
  t.is(value(one, 'h_seconds_sum'), 0.001)
  const two = await r.metrics()
  t.is(value(two, 'h_seconds_count'), 37)
  // 35 over 3 samples: 12, 12, 11 (cumulative buckets: 2 + 12, then + 12, then + 11 above 0.01).
  t.is(value(two, 'h_seconds_bucket{le="0.001"}'), 14)
  t.is(value(two, 'h_seconds_bucket{le="0.01"}'), 26)
  t.is(value(two, 'h_seconds_bucket{le="+Inf"}'), 37)
  t.regex(two, /^# TYPE h_seconds histogram$/m)
})

test('decisions with no time count in +Inf only; more samples than decisions never count twice', async t => {
  const { r } = make([{ times: [], decisions: 3 }, { times: [0.0001, 0.0001, 0.0001], decisions: 2 }])
  const one = await r.metrics()
  t.is(value(one, 'h_seconds_count'), 3)
  t.is(value(one, 'h_seconds_bucket{le="0.01"}'), 0)
  const two = await r.metrics()
  t.is(value(two, 'h_seconds_count'), 5)
  t.is(value(two, 'h_seconds_bucket{le="0.001"}'), 2)
})
