/**
 * The schemas quotad validates with, read from `cluster.schema.json` (the
 * package's root): the whole cluster file, and the `rules` list alone (saved
 * rules in the state file and the journal, by the same definition). Their
 * validators are generated from these at build time (schema-code-gen.ts,
 * into schema-code.cjs beside this module's output); schema.ts reads the
 * validators' errors.
 */
import { readFileSync } from 'node:fs'

export type Json = Record<string, unknown>

export const SCHEMA = JSON.parse(readFileSync(new URL('../../../cluster.schema.json', import.meta.url), 'utf8')) as Json
export const DEFS = SCHEMA.definitions as Record<string, Json>

/** The schemas by the name of their validator in schema-code.cjs. */
export const VALIDATED: Readonly<Record<'validateFile' | 'validateRules', Json>> = {
  validateFile: SCHEMA,
  validateRules: { definitions: DEFS, type: 'object', required: ['rules'], properties: { rules: (SCHEMA.properties as Json).rules } }
}

/** The ajv options the validators are generated with (schema.ts reads `verbose`'s parentSchema, all errors at once). */
export const AJV_OPTIONS = { allErrors: true, strict: false, verbose: true } as const
