// The validators schema-code-gen.ts generates at build time from schema-source.ts's schemas (ajv standalone).
import type { ValidateFunction } from 'ajv'

export declare const validateFile: ValidateFunction
export declare const validateRules: ValidateFunction
