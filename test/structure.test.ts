/**
 * The simulator drives the daemon's code, never a copy of it (issue 44,
 * item 2): what a node does around its I/O (persist then reply, a grant
 * only once covered, each request settled once, a member's forward served)
 * is one interpreter, src/cluster/node-effects.ts, that the daemon's node
 * and the simulator's build on their own ports. Read from the sources with
 * the TypeScript compiler's parser: imports, constructions and calls, not
 * comments.
 */
import test from 'ava'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const SIM = join(ROOT, 'src/sim')
const EFFECTS = join(ROOT, 'src/cluster/node-effects.ts')

function parse (file: string): ts.SourceFile {
  return ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true)
}

function walk (node: ts.Node, visit: (n: ts.Node) => void): void {
  visit(node)
  node.forEachChild(c => { walk(c, visit) })
}

/** The source files `file` imports (relative imports, `.js` read as its `.ts`), type-only ones included. */
function imports (file: string): string[] {
  const out: string[] = []
  for (const s of parse(file).statements) {
    if (!ts.isImportDeclaration(s) && !ts.isExportDeclaration(s)) continue
    const spec = s.moduleSpecifier
    if (spec === undefined || !ts.isStringLiteral(spec) || !spec.text.startsWith('.')) continue
    out.push(resolve(dirname(file), spec.text.replace(/\.js$/, '.ts')))
  }
  return out
}

/** Every source file `file` reaches through its imports, itself included. */
function reach (file: string): Set<string> {
  const seen = new Set<string>()
  const todo = [file]
  while (todo.length > 0) {
    const f = todo.pop() as string
    if (seen.has(f) || !existsSync(f)) continue
    seen.add(f)
    todo.push(...imports(f))
  }
  return seen
}

/** Whether `file` constructs `new NodeEffects(...)` with NodeEffects imported from node-effects.ts. */
function buildsEffects (file: string): boolean {
  const sf = parse(file)
  let imported = false
  let built = false
  walk(sf, n => {
    if (ts.isImportDeclaration(n) && ts.isStringLiteral(n.moduleSpecifier) &&
      resolve(dirname(file), n.moduleSpecifier.text.replace(/\.js$/, '.ts')) === EFFECTS) {
      const b = n.importClause?.namedBindings
      if (b !== undefined && ts.isNamedImports(b) && b.elements.some(e => e.name.text === 'NodeEffects' && !e.isTypeOnly)) imported = true
    }
    if (ts.isNewExpression(n) && ts.isIdentifier(n.expression) && n.expression.text === 'NodeEffects') built = true
  })
  return imported && built
}

const simFiles = readdirSync(SIM).filter(f => f.endsWith('.ts')).map(f => join(SIM, f))

test('the simulator\'s copies of the driver are gone', t => {
  for (const f of ['sim-requests.ts', 'sim-replication.ts']) t.false(existsSync(join(SIM, f)), `src/sim/${f} is back`)
})

test('the daemon\'s node and the simulator\'s node build the same effects interpreter', t => {
  t.true(buildsEffects(join(ROOT, 'src/cluster/cluster-node.ts')), 'cluster-node.ts builds a NodeEffects')
  const builders = simFiles.filter(buildsEffects).map(f => relative(ROOT, f))
  t.deepEqual(builders, ['src/sim/sim-ports.ts'], 'the simulator builds its NodeEffects in sim-ports.ts')
  t.true(reach(join(SIM, 'virtual-cluster.ts')).has(join(ROOT, 'src/sim/sim-ports.ts')), 'the virtual cluster runs its nodes on sim-ports.ts')
  t.true(reach(join(ROOT, 'src/daemon.ts')).has(EFFECTS), 'the daemon reaches node-effects.ts')
})

/**
 * What only the interpreter may call: the core's handlers of requests and
 * replies, the journal's take and its durable marks, the forward serving
 * (all of `forwarding`), and the codecs of requests and calls. The
 * simulator may read the core's state (its audits do), never drive these.
 */
const DRIVER_CALLS = new Set([
  'onWant', 'onGrant', 'onAck', 'onReply', 'onRequestFailed', 'onJournalWrite', 'onJget', 'onJcopy', 'onJgetFailed', 'journalAck',
  'localDone', 'whenCovered', 'whenDurable', 'outbound', 'journalCheckpoint', 'storeReplica',
  'encodeRequest', 'encodeFwd', 'decodeFwd', 'encodeFans', 'decodeFans', 'encodeJrep'
])

/** Where `sf` drives the core's I/O itself: `line: what` for each call (or `.forwarding`) the interpreter alone may make. */
function driverCalls (sf: ts.SourceFile): string[] {
  const found: string[] = []
  walk(sf, n => {
    const at = (what: string): void => { found.push(`${sf.fileName}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1} ${what}`) }
    // Serving a forward, or reading one's answer, goes through the core's `forwarding` (forward.ts): never from here.
    if (ts.isPropertyAccessExpression(n) && n.name.text === 'forwarding') at('.forwarding')
    if (!ts.isCallExpression(n)) return
    const callee = n.expression
    const name = ts.isPropertyAccessExpression(callee) ? callee.name.text : ts.isIdentifier(callee) ? callee.text : ''
    if (DRIVER_CALLS.has(name)) at(`${name}()`)
    // The journal's take: what to write next is the interpreter's (a failed write's checkpoint, the replication position).
    if (name === 'take' && ts.isPropertyAccessExpression(callee) && /\b(replication|journal)$/.test(callee.expression.getText(sf))) at('take()')
  })
  return found
}

test('no file in src/sim serves requests or persists for the driver', t => {
  const found = simFiles.flatMap(f => driverCalls(parse(f)))
  t.deepEqual(found, [], 'src/sim drives the core\'s I/O itself: do it in node-effects.ts, and give the simulator a port')
})

test('the check sees a copy: a file that serves a want, takes the journal and serves a forward is caught', t => {
  // The same scan over a made-up file, so the test above cannot pass by seeing nothing.
  const text = 'export function f (tc: any) {\n  tc.onWant(m, id, 0)\n  tc.replication.take(tc.journal, () => journalCheckpoint(tc))\n  tc.forwarding.serve(m)\n}'
  const found = driverCalls(ts.createSourceFile('copy.ts', text, ts.ScriptTarget.Latest, true))
  t.deepEqual(found.sort(), ['copy.ts:2 onWant()', 'copy.ts:3 journalCheckpoint()', 'copy.ts:3 take()', 'copy.ts:4 .forwarding'])
})
