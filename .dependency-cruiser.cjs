// Import rules checked by `npm run lint` (issue 44, item 6): they hold today
// and keep the module structure from sliding back. Type imports count: an
// `import type` is still a dependency of one file's meaning on another's.
//
// What they do not enforce yet (the targets, tracked in numbers, not
// rules): the largest import cycle inside src/cluster (40 files with type
// imports, 3 without, at the commit that added this file) and how many files
// import the machine, src/cluster/cluster-core.ts (39 in src).
/* global module */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycle-across-folders',
      comment: 'A cycle may stay inside one folder (src/cluster has one today), never run through two: a folder is a layer, and a layer below does not reach back up (src/cluster/transport, src/sim, src/cli, src/server... against src/cluster).',
      severity: 'error',
      from: { path: '^(.+)/[^/]+$' },
      to: { circular: true, via: { pathNot: '^$1/[^/]+$' } }
    },
    {
      name: 'only-the-cluster-and-sim-import-the-machine',
      comment: 'ClusterCore is the pure machine: src/cluster drives it (cluster-node.ts is the daemon\'s driver) and src/sim drives the same code on virtual time. Anything else in src reaches the cluster through the driver, not the machine.',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/cluster/', '^src/sim/', '^src/daemon\\.ts$'] },
      to: { path: '^src/cluster/cluster-core\\.ts$' }
    },
    {
      name: 'src-does-not-import-the-simulator',
      comment: 'The daemon does not ship the simulator\'s code paths: only src/sim itself and the `quotad simulate` command (src/cli/simulate.ts) import it.',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/sim/', '^src/cli/simulate\\.ts$'] },
      to: { path: '^src/sim/' }
    },
    {
      name: 'src-does-not-import-tests',
      comment: 'Test helpers and benches are not part of the daemon.',
      severity: 'error',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' }
    }
  ],
  required: [
    {
      name: 'the-simulator-and-the-daemon-share-the-driver',
      comment: 'The simulator builds its nodes on the daemon\'s effects interpreter (node-effects.ts), not a copy of it (issue 44, item 2). This checks the import; test/structure.test.ts checks with the parser that no file in src/sim makes the interpreter\'s calls itself.',
      severity: 'error',
      module: { path: ['^src/sim/sim-(ports|node)\\.ts$', '^src/cluster/cluster-node\\.ts$'] },
      to: { path: '^src/cluster/node-effects\\.ts$' }
    }
  ],
  options: {
    // Type imports (`import type`) are dependencies too: see the top.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules|packages/[^/]+/dist)/' }
  }
}
