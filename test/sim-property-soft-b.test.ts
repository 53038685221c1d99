/** The simulator's property test, soft mode, the second half of the scenarios (test/helpers/property.ts). */
import { propertyTests } from './helpers/property.js'

propertyTests('soft', 1)
