/** The simulator's property test, hard mode, the second half of the scenarios (test/helpers/property.ts). */
import { propertyTests } from './helpers/property.js'

propertyTests('hard', 1)
